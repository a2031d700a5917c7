"""The MoE FP4 family, end to end (issue 12): profiles with two families, one verdict and one
choice per family, `--family`, `--prefer`/`--require` routed to the family they name, `env` and
`config` writing both families' knobs, the MoE variables' lint, and the MoE live check (the
emulation on the CPU, the FlashInfer CUTLASS adapter against a labelled fake)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from fp4doctor import facts, profile
from fp4doctor.cli import main
from fp4doctor.doctor import Outcome, Question, QuestionError, diagnose
from fp4doctor.profile.schema import parse
from fp4doctor.profile.yamlnode import ProfileError
from fp4doctor.selection.choice import ResolveError, meant_for

HOSTS = Path(__file__).parent / "fixtures" / "hosts"
B200 = str(HOSTS / "b200.json")
H200 = str(HOSTS / "h200.json")


def cli(*args: str, env: dict[str, str] | None = None) -> Any:
    """An in-process run on a facts file (nothing of this host is read)."""
    return CliRunner().invoke(main, list(args), env=env)


def ask(**kwargs: Any) -> Any:
    return diagnose(Question(**kwargs))


# --- the profile schema ---------------------------------------------------------------------

DEMO = """\
schema: 1
target: demo
title: Demo
engine: {package: demo-engine, newest_known: "2.0"}
backends:
  fast: {summary: fast, native: true, aliases: [cutlass]}
  slow: {summary: slow, native: false}
  fast-moe: {summary: fast experts, native: true, family: moe, aliases: [cutlass]}
  slow-moe: {summary: slow experts, native: false, family: moe}
eras:
  - versions: "<2.0"
    knobs: []
    auto: [{backend: fast}]
    moe:
      knobs:
        - env: DEMO_MOE
          values: {fast-moe: fast, slow-moe: slow}
      auto: [{backend: slow-moe}]
  - versions: ">=2.0"
    knobs:
      - cli: --linear
        values: {fast: fast, slow: slow}
"""


def test_a_profile_has_families_and_each_era_inherits_per_family() -> None:
    p = parse(DEMO, "demo.yaml")
    assert p.families() == ["linear", "moe"]
    moe = p.view("moe")
    assert list(moe.backends) == ["fast-moe", "slow-moe"]
    second = moe.eras[1]  # no moe block: inherits the first era's
    assert [k.name for k in second.knobs] == ["DEMO_MOE"]
    assert [s.backend for s in second.auto] == ["slow-moe"]
    linear = p.view("linear")
    assert [k.name for k in linear.eras[1].knobs] == ["--linear"]
    # the linear view counts the MoE variable as read (its own family lints it)
    assert "DEMO_MOE" in linear.eras[0].read_variables()


def test_a_knob_may_name_only_backends_of_its_family() -> None:
    bad = DEMO.replace("values: {fast-moe: fast, slow-moe: slow}", "values: {fast: fast}")
    with pytest.raises(ProfileError, match=r"demo.yaml:\d+: .*names no backend"):
        parse(bad, "demo.yaml")


def test_an_alias_repeats_only_across_families() -> None:
    bad = DEMO.replace(
        "slow-moe: {summary: slow experts, native: false, family: moe}",
        "slow-moe: {summary: slow, native: false, family: moe, aliases: [cutlass]}",
    )
    with pytest.raises(ProfileError, match="'cutlass' is used by two backends"):
        parse(bad, "demo.yaml")


def test_also_is_for_env_knobs_and_scalar_for_config_knobs() -> None:
    bad = DEMO.replace("      - cli: --linear\n", "      - cli: --linear\n        also: {X: '1'}\n")
    with pytest.raises(ProfileError, match="only an env knob"):
        parse(bad, "demo.yaml")
    bad = DEMO.replace("      - cli: --linear\n", "      - cli: --linear\n        scalar: true\n")
    with pytest.raises(ProfileError, match="only a config knob"):
        parse(bad, "demo.yaml")


def test_unknown_family_is_refused_with_the_choices() -> None:
    bad = DEMO.replace("family: moe, aliases", "family: dense, aliases")
    with pytest.raises(ProfileError, match="linear, moe"):
        parse(bad, "demo.yaml")


# --- acceptance: the shipped profiles on the fixture hosts ----------------------------------


@pytest.mark.parametrize(
    ("version", "moe_knob", "moe_value"),
    [
        ("0.15.0", "VLLM_FLASHINFER_MOE_BACKEND", "masked_gemm"),
        ("0.33.0", "--moe-backend", "flashinfer_cutedsl"),
    ],
)
def test_vllm_on_b200_shows_both_families_with_the_release_knobs(
    version: str, moe_knob: str, moe_value: str
) -> None:
    # FlashInfer 0.6.1 on this fixture: its MoE kernels have autotuner bugs, which autotuning off
    # (stated) rules out; its TRT-LLM MoE has an EP >= 32 crash, not ruled out: the CuTe-DSL one
    report = ask(target="vllm", facts_file=B200, engine_version=version, autotune=False)
    assert [p.family for p in report.families] == ["linear", "moe"]
    moe = report.families[1]
    assert moe.resolution.chosen == "flashinfer-cutedsl-moe"
    assert moe.resolution.knob is not None and moe.resolution.knob.name == moe_knob
    assert moe.resolution.knob.values["flashinfer-cutedsl-moe"][0] == moe_value
    text = cli(
        "check",
        "--target",
        "vllm",
        "--facts",
        B200,
        "--engine-version",
        version,
        "--autotune",
        "off",
    ).stdout
    assert "Backends (fused-MoE FP4 GEMM)" in text and "Choice (fused-MoE FP4 GEMM)" in text


def test_vllm_0_15_env_sets_the_moe_variable_with_its_companion() -> None:
    done = cli(
        "env",
        "--facts",
        B200,
        "--engine-version",
        "0.15.0",
        "--shell",
        "dotenv",
        "--autotune",
        "off",
    )
    assert done.exit_code == 0, done.output
    assert "VLLM_FLASHINFER_MOE_BACKEND=masked_gemm" in done.stdout
    assert "VLLM_USE_FLASHINFER_MOE_FP4=1" in done.stdout


def test_vllm_0_33_env_and_config_carry_both_flags() -> None:
    off = ("--autotune", "off")  # FlashInfer 0.6.1's MoE autotuner bugs ruled out
    done = cli("env", "--facts", B200, "--engine-version", "0.33.0", "--shell", "json", *off)
    exports = json.loads(done.stdout)
    args = exports["set"]["FP4DOCTOR_VLLM_ARGS"]
    assert "--linear-backend=" in args and "--moe-backend=flashinfer_cutedsl" in args
    config = cli("config", "--facts", B200, "--engine-version", "0.33.0", "-o", "-", *off).stdout
    data = yaml.safe_load(config)
    assert data["moe-backend"] == "flashinfer_cutedsl" and "linear-backend" in data


def test_sglang_0_5_23_moe_runner_backend() -> None:
    # autotuning off (stated) rules out FlashInfer 0.6.1's MoE autotuner bugs
    report = ask(target="sglang", facts_file=B200, engine_version="0.5.23", autotune=False)
    moe = report.families[1]
    assert moe.resolution.knob is not None and moe.resolution.knob.name == "--moe-runner-backend"
    done = cli(
        "env", "--target", "sglang", "--facts", B200, "--engine-version", "0.5.23",
        "--autotune", "off",
    )  # fmt: skip
    assert "--moe-runner-backend=" in done.stdout


def test_trtllm_writes_moe_config_backend_as_one_value() -> None:
    done = cli("config", "--target", "trtllm", "--facts", B200, "--prefer", "moe:trtllm", "-o", "-")
    assert done.exit_code == 0, done.output
    assert yaml.safe_load(done.stdout)["moe_config"] == {"backend": "TRTLLM"}


def test_flashinfer_direct_names_the_fused_moe_entry_point() -> None:
    report = ask(target="flashinfer", facts_file=B200, autotune=False)  # autotuner bugs ruled out
    moe = report.families[1]
    assert moe.resolution.chosen == "flashinfer-cutlass-moe"
    assert moe.resolution.arguments == (("moe_entry_point", "cutlass_fused_moe"),)
    # no automatic order and a knob: the caller chooses, which is not a warning
    assert not [f for f in moe.resolution.findings if f.id == "resolve.moe.engine_auto"]


@pytest.mark.parametrize(
    ("target", "version", "expected"),
    [
        ("vllm", "0.15.0", "marlin-moe"),
        ("vllm", "0.33.0", "marlin-moe"),
        ("sglang", "0.5.23", "marlin-moe"),
    ],
)
def test_h200_resolves_moe_to_its_non_native_path(target: str, version: str, expected: str) -> None:
    report = ask(target=target, facts_file=H200, engine_version=version)
    moe = report.families[1]
    assert moe.resolution.chosen == expected
    for name, verdict in moe.evaluation.verdicts.items():
        if moe.evaluation.profile.backends[name].native:
            problem = verdict.first_problem()
            assert problem is not None and "compute capability 9.0" in problem.reason, name


def test_sglang_before_marlin_refuses_nvfp4_moe_on_hopper() -> None:
    report = ask(target="sglang", facts_file=H200, engine_version="0.5.10")
    moe = report.families[1]
    assert moe.resolution.chosen is None and report.outcome is Outcome.NOT_READY
    choice = next(f for f in moe.resolution.findings if f.id == "resolve.moe.choice")
    assert "no FP4 MoE backend" in choice.reason


# --- --family, --prefer and --require --------------------------------------------------------


def test_family_narrows_the_check() -> None:
    report = ask(target="vllm", facts_file=B200, family="moe")
    assert [p.family for p in report.families] == ["moe"]
    assert report.families[0].evaluation.family == "moe"
    done = cli("check", "--facts", B200, "--family", "linear", "--json")
    doc = json.loads(done.stdout)
    assert list(doc["families"]) == ["linear"]
    assert not [f for f in doc["findings"] if f["id"].startswith("resolve.moe.")]


def test_family_the_profile_lacks_is_a_usage_error() -> None:
    with pytest.raises(QuestionError, match=r"--family 'nonsense'.*linear, moe"):
        ask(target="vllm", facts_file=B200, family="nonsense")
    done = cli("check", "--facts", B200, "--family", "dense")
    assert done.exit_code == 2 and "linear" in done.output


def test_prefer_applies_to_the_family_whose_backend_it_names() -> None:
    vllm = profile.load("vllm")
    assert meant_for(vllm, "linear", "cudnn", "--prefer") == "cudnn"
    assert meant_for(vllm, "moe", "cudnn", "--prefer") is None  # no MoE cuDNN backend
    assert meant_for(vllm, "moe", "marlin", "--prefer") == "marlin"
    assert meant_for(vllm, "linear", "moe:marlin", "--prefer") is None
    assert meant_for(vllm, "moe", "flashinfer-cutlass", "--prefer") == "flashinfer-cutlass"
    assert meant_for(vllm, "moe", "cudnn,moe:cutlass", "--prefer") == "cutlass"
    with pytest.raises(ResolveError, match="unknown backend 'nope'"):
        meant_for(vllm, "linear", "nope", "--prefer")
    with pytest.raises(ResolveError, match="unknown family"):
        meant_for(vllm, "linear", "dense:cutlass", "--prefer")
    with pytest.raises(ResolveError, match="one per family"):
        meant_for(vllm, "moe", "marlin,cutlass", "--prefer")


def test_prefer_names_a_moe_backend_and_require_native_covers_both() -> None:
    report = ask(target="vllm", facts_file=B200, engine_version="0.33.0", prefer="moe:marlin")
    assert report.families[1].resolution.chosen == "marlin-moe"
    assert report.families[0].resolution.chosen != "marlin"
    hopper = ask(target="vllm", facts_file=H200, engine_version="0.33.0", require="native")
    assert hopper.outcome is Outcome.NOT_READY
    assert {f.id for f in hopper.blocking()} >= {"resolve.require", "resolve.moe.require"}


# --- the lint of the MoE variables ----------------------------------------------------------


def lint(version: str, **env: str) -> dict[str, Any]:
    host = facts.load(B200)
    from fp4doctor.rules import evaluate

    ev = evaluate(profile.load("vllm"), host, env=env, override_version=version, family="moe")
    return {f.id: f for f in ev.env_findings}


def test_a_moe_variable_read_only_with_another_is_said_to_do_nothing() -> None:
    found = lint("0.15.0", VLLM_FLASHINFER_MOE_BACKEND="throughput")
    assert found["env.VLLM_FLASHINFER_MOE_BACKEND.unread"].status.value == "warn"
    assert "VLLM_USE_FLASHINFER_MOE_FP4=1" in found["env.VLLM_FLASHINFER_MOE_BACKEND.unread"].reason
    assert "env.VLLM_FLASHINFER_MOE_BACKEND" not in found  # it selects nothing
    both = lint("0.15.0", VLLM_FLASHINFER_MOE_BACKEND="throughput", VLLM_USE_FLASHINFER_MOE_FP4="1")
    assert "env.VLLM_USE_FLASHINFER_MOE_FP4.overridden" not in both  # a companion, not a loser
    assert both["env.VLLM_FLASHINFER_MOE_BACKEND"].backend == "flashinfer-cutlass-moe"


def test_invalid_and_deprecated_moe_variables() -> None:
    found = lint("0.15.0", VLLM_FLASHINFER_MOE_BACKEND="fast", VLLM_USE_FLASHINFER_MOE_FP4="yes")
    assert found["env.VLLM_FLASHINFER_MOE_BACKEND"].status.value == "fail"
    assert "masked_gemm" in found["env.VLLM_FLASHINFER_MOE_BACKEND"].reason
    assert found["env.VLLM_USE_FLASHINFER_MOE_FP4"].status.value == "fail"
    deprecated = lint("0.22.0", VLLM_USE_FLASHINFER_MOE_FP4="1")
    assert "env.VLLM_USE_FLASHINFER_MOE_FP4.deprecated" in deprecated


def test_check_reports_the_moe_variables_a_release_ignores(tmp_path: Path) -> None:
    host = json.loads(Path(B200).read_text())
    host["env"] = {**host["env"], "VLLM_USE_FLASHINFER_MOE_FP4": "1"}
    snapshot = tmp_path / "b200-moe-env.json"
    snapshot.write_text(json.dumps(host))
    done = cli("check", "--facts", str(snapshot), "--engine-version", "0.33.0", "--json")
    found = {f["id"]: f for f in json.loads(done.stdout)["findings"]}
    ignored = found["env.VLLM_USE_FLASHINFER_MOE_FP4"]
    assert ignored["status"] == "warn" and "ignores" in ignored["reason"]
    assert "--moe-backend" in ignored["reason"]
    old = cli("check", "--facts", str(snapshot), "--engine-version", "0.20.0", "--json")
    found = {f["id"]: f for f in json.loads(old.stdout)["findings"]}
    assert found["env.VLLM_USE_FLASHINFER_MOE_FP4"]["status"] == "pass"  # read in 0.20


# --- the JSON report ------------------------------------------------------------------------


def test_json_report_holds_every_family_alike_and_none_at_the_top() -> None:
    off = ("--autotune", "off")  # FlashInfer 0.6.1's MoE autotuner bugs ruled out
    doc = json.loads(
        cli("check", "--facts", B200, "--engine-version", "0.33.0", "--json", *off).stdout
    )
    assert not {"backends", "engine_auto", "resolution"} & set(doc)
    assert set(doc["families"]) == {"linear", "moe"}
    for family in doc["families"].values():
        assert {"backends", "engine_auto", "resolution", "ready", "chosen"} <= set(family)
    assert doc["families"]["moe"]["resolution"]["chosen"] == "flashinfer-cutedsl-moe"
    assert "flashinfer-trtllm-moe" in doc["families"]["moe"]["backends"]


def test_moe_advisories_judge_moe_backends() -> None:
    report = ask(target="vllm", facts_file=B200, engine_version="0.33.0")
    trtllm = report.families[1].evaluation.verdicts["flashinfer-trtllm-moe"]
    bugs = [f for f in trtllm.findings if f.advisory is not None]
    assert bugs and all(f.family == "moe" for f in bugs)
    # Each fails only where its trigger is established; the others warn, saying what settles them.
    assert all(
        f.status.blocking == f.established for f in bugs if f.symptom and f.symptom.value != "slow"
    )


def test_with_env_names_a_value_of_its_knob_and_a_valid_variable() -> None:
    """`with_env` (per backend) is written with the knob when it selects that backend only."""
    good = DEMO.replace(
        "      - cli: --linear\n",
        "      - cli: --linear\n        with_env: {slow: {DEMO_OFF: fast}}\n",
    )
    knob = parse(good, "demo.yaml").eras[1].knobs[0]
    assert knob.env_for("slow") == (("DEMO_OFF", "fast"),) and knob.env_for("fast") == ()
    for entry, message in (("{nope: {X: '1'}}", "names no value"), ("{slow: {'1X': a}}", "not a")):
        bad = DEMO.replace(
            "      - cli: --linear\n", f"      - cli: --linear\n        with_env: {entry}\n"
        )
        with pytest.raises(ProfileError, match=rf"demo.yaml:\d+: .*{message}"):
            parse(bad, "demo.yaml")


def test_with_args_names_a_value_of_a_cli_knob_and_a_flag() -> None:
    """`with_args` (per backend) is written with a CLI knob when it selects that backend only."""
    good = DEMO.replace(
        "      - cli: --linear\n",
        "      - cli: --linear\n        with_args: {slow: {--quantization: fp4}}\n",
    )
    knob = parse(good, "demo.yaml").eras[1].knobs[0]
    assert knob.args_for("slow") == (("--quantization", "fp4"),) and knob.args_for("fast") == ()
    for entry, message in (
        ("{nope: {--q: a}}", "names no value"),
        ("{slow: {quantization: a}}", "not a command-line flag"),
    ):
        bad = DEMO.replace(
            "      - cli: --linear\n", f"      - cli: --linear\n        with_args: {entry}\n"
        )
        with pytest.raises(ProfileError, match=rf"demo.yaml:\d+: .*{message}"):
            parse(bad, "demo.yaml")


def test_sglang_config_writes_the_flag_the_cutedsl_moe_knob_needs(tmp_path: Path) -> None:
    out = tmp_path / "sglang.yaml"
    args = ["config", "--target", "sglang", "--facts", str(HOSTS / "b200.json"),
            "--engine-version", "0.5.23", "--prefer", "moe:flashinfer-cutedsl-moe",
            "--autotune", "off", "--no-engine", "-o", str(out)]  # fmt: skip
    result = CliRunner().invoke(main, args)
    assert result.exit_code in (0, 1), result.output
    written = yaml.safe_load(out.read_text())
    assert written["moe-runner-backend"] == "flashinfer_cutedsl"
    assert written["quantization"] == "modelopt_fp4"


def test_sglang_cutedsl_moe_knob_gives_the_quantization_sglang_asserts() -> None:
    """SGLang 0.5.11+ asserts `--quantization modelopt_fp4` with `--moe-runner-backend
    flashinfer_cutedsl` (asked of the real 0.5.16 and 0.5.23: AssertionError without it); 0.5.10
    has no such assert, and no other MoE backend gets the flag."""
    from fp4doctor.rules import evaluate
    from fp4doctor.selection.choice import resolve

    host = facts.load(HOSTS / "b200.json")
    prof = profile.load("sglang")
    cases = (("0.5.23", True), ("0.5.16", True), ("0.5.11", True), ("0.5.10", False))
    for version, written in cases:
        ev = evaluate(prof, host, override_version=version, family="moe")
        r = resolve(ev, prefer="flashinfer-cutedsl-moe")
        assert r.chosen == "flashinfer-cutedsl-moe", version
        assert (("--quantization", "modelopt_fp4") in r.cli_args) is written, (version, r.cli_args)
        other = resolve(ev, prefer="flashinfer-cutlass-moe")
        assert all(flag != "--quantization" for flag, _ in other.cli_args), version
