"""The data set of known problems (profiles/advisories.yaml): it parses, it names real backends,
a known crash or wrong output fails the backend (and an engine that picks it is not ready),
`env` steers away, `slow` only warns, and `fp4doctor advisories` lists what affects a host."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from fp4doctor import profile
from fp4doctor.cli import main
from fp4doctor.deployment import Deployment
from fp4doctor.doctor import Outcome, Question, diagnose
from fp4doctor.profile.advisories import KnownIssue, parse, validate
from fp4doctor.profile.triggers import Settled
from fp4doctor.profile.yamlnode import ProfileError

HOSTS = Path(__file__).parent / "fixtures" / "hosts"
DATA = profile.builtin_dir() / "advisories.yaml"


def with_packages(name: str, tmp_path: Path, **versions: str) -> str:
    """A fixture host with some package versions changed and no FP4 variable set (synthetic,
    as the fixture says)."""
    doc = json.loads((HOSTS / f"{name}.json").read_text())
    doc["packages"]["versions"].update(versions)
    doc["env"] = {k: v for k, v in doc["env"].items() if not k.startswith(("VLLM_", "SGLANG_"))}
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(doc))
    return str(path)


def test_the_shipped_data_set_parses_and_names_only_real_backends() -> None:
    issues = profile.known_issues()
    assert len(issues) >= 25
    backends = {b for t in profile.builtin_names() for b in profile.load(t).backends}
    validate(issues, backends, str(DATA))
    for issue in issues:
        # An upstream place a reader can open: the tracker, or (for a fix read in the released
        # wheels' diffs, tools/advisories/*.tsv) the release on the package index.
        assert issue.source.startswith(("https://github.com/", "https://pypi.org/project/")), (
            issue.id
        )
        if issue.fixed_in is not None:
            assert not issue.versions.contains(issue.fixed_in, prereleases=True), issue.id


def test_a_malformed_entry_names_file_line_and_key() -> None:
    text = "schema: 1\nadvisories:\n  - id: x\n    family: linear\n    effect: garbage\n"
    with pytest.raises(ProfileError, match=r"^adv\.yaml:5: 'advisories\[0\]\.effect'"):
        parse(text, "adv.yaml")


def test_a_typo_in_a_backend_name_is_refused() -> None:
    issue = dataclasses.replace(profile.known_issues()[0], backends=("flashinfer-cutlas",))
    with pytest.raises(ProfileError, match="names no backend of any profile"):
        validate((issue,), {"flashinfer-cutlass"}, "adv.yaml")


def sm120_with_flashinfer(tmp_path: Path, version: str) -> str:
    """The RTX 5090 fixture (vLLM 0.22) with another FlashInfer release."""
    return with_packages(
        "rtx5090", tmp_path, **{"flashinfer-python": version, "flashinfer-cubin": version}
    )


def test_a_known_wrong_output_fails_the_backend_and_the_engines_own_pick(tmp_path: Path) -> None:
    # SM120 with FlashInfer 0.6.6: its CUTLASS FP4 GEMM leaves NaN tiles under load before 0.6.7
    # (flashinfer PR #2780), and vLLM 0.22 picks it by itself; served at 64 requests at once.
    host = sm120_with_flashinfer(tmp_path, "0.6.6")
    report = diagnose(Question(facts_file=host, concurrency=64))
    cutlass = report.families[0].evaluation.verdicts["flashinfer-cutlass"]
    assert not cutlass.valid
    bug = next(f for f in cutlass.findings if ".advisory." in f.id and "pdl-nan" in f.id)
    assert bug.status.blocking and "wrong output" in bug.reason
    assert report.outcome is Outcome.NOT_READY
    auto = next(f for f in report.families[0].resolution.findings if f.id == "resolve.engine_auto")
    assert auto.status.blocking
    assert report.families[0].resolution.chosen not in (None, "flashinfer-cutlass")


def test_an_unestablished_trigger_warns_and_the_choice_passes_over_it(tmp_path: Path) -> None:
    """Issue 31: without --concurrency nothing says the load that triggers it is there: a `!`
    that names the condition and how to settle it, the host ready, the choice elsewhere."""
    report = diagnose(Question(facts_file=sm120_with_flashinfer(tmp_path, "0.6.6")))
    linear = report.families[0]
    cutlass = linear.evaluation.verdicts["flashinfer-cutlass"]
    bug = next(f for f in cutlass.findings if f.advisory and "pdl-nan" in f.advisory)
    assert cutlass.valid and bug.status.value == "warn" and not bug.established
    assert bug.fix is not None and "--concurrency N" in bug.fix
    assert linear.chosen not in (None, "flashinfer-cutlass")
    assert any("passing over flashinfer-cutlass" in n for n in linear.resolution.notes)
    single = diagnose(Question(facts_file=sm120_with_flashinfer(tmp_path, "0.6.6"), concurrency=1))
    ruled_out = single.families[0].evaluation.verdicts["flashinfer-cutlass"].findings
    assert any(
        f.advisory and "pdl-nan" in f.advisory and f.status.value == "pass" for f in ruled_out
    )


def test_the_fixing_release_clears_it(tmp_path: Path) -> None:
    report = diagnose(Question(facts_file=sm120_with_flashinfer(tmp_path, "0.6.7")))
    findings = report.families[0].evaluation.verdicts["flashinfer-cutlass"].findings
    assert not [f for f in findings if "pdl-nan" in f.id]


def test_env_steers_away_and_says_why(tmp_path: Path) -> None:
    facts_file = sm120_with_flashinfer(tmp_path, "0.6.6")
    result = CliRunner().invoke(main, ["env", "--facts", facts_file, "--concurrency", "64"])
    assert result.exit_code == 0, result.stderr
    assert "flashinfer_cutlass" not in result.stdout
    assert "steering away" in result.stderr and "known bug" in result.stderr


def test_a_required_backend_with_a_known_wrong_output_is_not_ready(tmp_path: Path) -> None:
    facts_file = sm120_with_flashinfer(tmp_path, "0.6.6")
    args = ["check", "--no-smoke", "--facts", facts_file, "--require", "flashinfer-cutlass"]
    args += ["--concurrency", "64"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1
    assert "gives wrong output" in result.stdout


def test_slow_only_warns(tmp_path: Path) -> None:
    path = with_packages(
        "b200", tmp_path, **{"flashinfer-python": "0.6.12", "flashinfer-cubin": "0.6.12"}
    )
    report = diagnose(Question(facts_file=path))
    slow = [
        f
        for f in report.families[0].evaluation.verdicts["flashinfer-cudnn"].findings
        if ".advisory." in f.id
    ]
    assert slow and all(f.status.value == "warn" for f in slow)
    assert report.families[0].evaluation.valid("flashinfer-cudnn")


def test_each_entry_attaches_only_to_backends_of_its_family() -> None:
    families = {i.id: i.family for i in profile.known_issues()}
    attached: set[str] = set()
    for target in profile.builtin_names():
        for backend in profile.load(target).backends.values():
            for advisory in backend.advisories:
                if advisory.id in families:
                    assert families[advisory.id] == backend.family, (backend.name, advisory.id)
                    attached.add(advisory.id)
    # The MoE entries judge the MoE backends now (the family exists in the shipped profiles).
    assert {i for i, f in families.items() if f == "moe"} & attached


def test_advisories_lists_what_affects_a_host_moe_included() -> None:
    result = CliRunner().invoke(
        main, ["advisories", "--facts", str(HOSTS / "rtx5090.json"), "--json"]
    )
    assert result.exit_code == 0
    found = {a["id"]: a for a in json.loads(result.stdout)}
    assert found["flashinfer-b12x-moe-fp4-quant-numerics"]["gpus"] == [0]
    human = CliRunner().invoke(main, ["advisories", "--facts", str(HOSTS / "h200.json")])
    assert human.exit_code == 0
    assert "No known FP4 bug affects" in human.stdout


def test_a_users_profile_advisory_can_state_its_effect(tmp_path: Path) -> None:
    user = tmp_path / "demo.yaml"
    user.write_text(
        """\
schema: 1
target: demo
title: Demo
engine: {package: demo-engine, newest_known: "1.0"}
backends:
  fast:
    summary: the fast one
    native: true
    advisories:
      - id: boom
        effect: crash
        if: [{compute_capability: [100]}]
        reason: "it crashes on B200"
        source: test
  slow:
    summary: the slow one
    native: false
eras:
  - versions: ">=1.0"
    source: test
    knobs:
      - env: DEMO_BACKEND
        values: {fast: fast, slow: slow}
    auto: [{backend: fast}, {backend: slow}]
"""
    )
    q = Question(target="demo", profiles=(str(user),), facts_file=str(HOSTS / "b200.json"))
    report = diagnose(q)
    assert not report.families[0].evaluation.valid("fast")
    assert report.families[0].resolution.chosen == "slow"
    assert report.outcome is Outcome.NOT_READY  # the engine left alone picks the crashing one


def known(issue_id: str) -> KnownIssue:
    return next(i for i in profile.known_issues() if i.id == issue_id)


def test_vllm_before_0_12_has_no_sm12x_kernel_for_its_cutlass_moe(tmp_path: Path) -> None:
    # vLLM 0.11.2 builds cutlass_fp4_group_mm for SM100 only and runs it on any GPU (vllm #29141,
    # fixed by #29242 in 0.12.0): on the RTX 5090 its own CUTLASS experts fail, and the engine,
    # which picks them by itself, is not ready as set.
    old = with_packages("rtx5090", tmp_path, vllm="0.11.2")
    report = diagnose(Question(facts_file=old, family="moe"))
    cutlass = report.families[0].evaluation.verdicts["cutlass-moe"]
    assert not cutlass.valid
    assert any("no-kernel-image" in f.id and f.status.blocking for f in cutlass.findings)
    fixed = with_packages("rtx5090", tmp_path, vllm="0.12.0")
    findings = diagnose(Question(facts_file=fixed, family="moe")).families[0].evaluation
    assert not [f for f in findings.verdicts["cutlass-moe"].findings if "no-kernel-image" in f.id]


@pytest.mark.parametrize(
    ("version", "listed"), [("0.2.12", False), ("0.6.3", True), ("0.6.12", True), ("0.6.13", False)]
)
def test_the_float32_global_scale_flaw_spans_the_releases_without_the_guard(
    tmp_path: Path, version: str, listed: bool
) -> None:
    # The dtype guard was commented out in v0.2.13 (#1396) and restored by #3497 (0.6.13);
    # flashinfer #2577 reports the zeros on 0.6.3.
    facts = sm120_with_flashinfer(tmp_path, version)
    result = CliRunner().invoke(main, ["advisories", "--facts", facts, "--json"])
    assert result.exit_code == 0
    found = {a["id"] for a in json.loads(result.stdout)}
    assert ("flashinfer-nvfp4-quantize-nonfp32-global-scale-zeros" in found) is listed


@pytest.mark.parametrize(
    ("issue_id", "architecture", "settled"),
    [
        # The MiniMax2 routing ignored routed_scaling_factor: only a model whose factor is not 1.
        (
            "flashinfer-trtllm-moe-minimax2-routed-scaling-ignored",
            "Step3p7ForConditionalGeneration",
            Settled.HOLDS,
        ),
        (
            "flashinfer-trtllm-moe-minimax2-routed-scaling-ignored",
            "MiniMaxM2ForCausalLM",
            Settled.RULED_OUT,
        ),
        # SGLang 0.5.15 dropped the bf16 cast in deepseek_v2.py's gate; GLM-4.x has its own gate.
        (
            "sglang-0.5.15-nvfp4-trtllm-moe-correction-bias-nan",
            "DeepseekV3ForCausalLM",
            Settled.HOLDS,
        ),
        (
            "sglang-0.5.15-nvfp4-trtllm-moe-correction-bias-nan",
            "GlmMoeDsaForCausalLM",
            Settled.HOLDS,
        ),
        (
            "sglang-0.5.15-nvfp4-trtllm-moe-correction-bias-nan",
            "Glm4MoeForCausalLM",
            Settled.RULED_OUT,
        ),
    ],
)
def test_a_model_trigger_names_the_architectures_the_code_path_serves(
    issue_id: str, architecture: str, settled: Settled
) -> None:
    deployment = Deployment(architectures=(architecture,))
    # The model condition of the trigger (others, such as the sglang entry's long prompts, are
    # conditions on the data: issue 39).
    arch = next(c for c in known(issue_id).trigger.conditions if c.KEY == "model_arch")
    assert arch.judge(deployment).settled is settled
