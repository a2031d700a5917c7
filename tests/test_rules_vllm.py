"""vLLM, era by era: knob names, accepted values, precedence and the automatic order.

Table-driven over the fixture hosts (tests/fixtures/hosts) × vLLM versions from the reference
(engines-nvfp4-backend-selection.md §1, read from the released wheels).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import schema_errors
from packaging.version import Version

from fp4doctor import facts, profile
from fp4doctor.cli import main
from fp4doctor.doctor import Outcome, Question, Report, diagnose
from fp4doctor.findings import Status
from fp4doctor.rules import Evaluation, Unverified, evaluate
from fp4doctor.selection.choice import ResolveError, resolve
from fp4doctor.selection.engine import engine_auto

HOSTS = Path(__file__).parent / "fixtures" / "hosts"
VLLM = profile.load("vllm")


def host(name: str, **env: str) -> facts.HostFacts:
    h = facts.load(HOSTS / f"{name}.json")
    return dataclasses.replace(h, env=dict(env))


def judge(name: str, version: str | None = None, **env: str) -> Evaluation:
    return evaluate(VLLM, host(name, **env), override_version=version)


def finding(ev: Evaluation, fid: str) -> tuple[Status, str]:
    for f in ev.all_findings():
        if f.id == fid:
            return f.status, f.reason
    raise AssertionError(f"no finding {fid}: {[f.id for f in ev.all_findings()]}")


# --- which knob selects cuDNN on a B200, per era ----------------------------------------------

CUDNN_KNOB = [
    ("0.11.1", ("VLLM_NVFP4_GEMM_BACKEND", "flashinfer-cudnn"), None),
    ("0.14.1", ("VLLM_NVFP4_GEMM_BACKEND", "flashinfer-cudnn"), None),
    ("0.15.1", ("VLLM_NVFP4_GEMM_BACKEND", "flashinfer-cudnn"), None),
    ("0.16.0", ("VLLM_NVFP4_GEMM_BACKEND", "flashinfer-cudnn"), None),
    ("0.19.1", ("VLLM_NVFP4_GEMM_BACKEND", "flashinfer-cudnn"), None),
    ("0.21.0", ("VLLM_NVFP4_GEMM_BACKEND", "flashinfer-cudnn"), None),
    ("0.22.0", None, ("--linear-backend", "flashinfer_cudnn")),  # env deprecated: CLI preferred
    ("0.23.0", None, ("--linear-backend", "flashinfer_cudnn")),
    ("0.24.0", None, ("--linear-backend", "flashinfer_cudnn")),
    ("0.27.1", None, ("--linear-backend", "flashinfer_cudnn")),
    ("0.33.0", None, ("--linear-backend", "flashinfer_cudnn")),
]


@pytest.mark.parametrize(("version", "env", "cli"), CUDNN_KNOB)
def test_prefer_cudnn_on_b200_uses_the_era_knob(
    version: str, env: tuple[str, str] | None, cli: tuple[str, str] | None
) -> None:
    r = resolve(judge("b200", version), prefer="cudnn")
    assert r.chosen == "flashinfer-cudnn"
    assert r.set_env == ((env,) if env else ())
    assert r.cli_args == ((cli,) if cli else ())
    # Whatever is chosen, the variables that would override or confuse it are unset.
    assert "VLLM_USE_CUDNN_FP4_GEMM" in r.unset_env
    if env is None and version >= "0.24":
        assert "VLLM_NVFP4_GEMM_BACKEND" in r.unset_env


def test_cudnn_cannot_be_selected_before_0_11_1_and_the_fallback_says_why() -> None:
    r = resolve(judge("b200", "0.10.2"), prefer="cudnn")
    assert r.chosen == "flashinfer-cutlass"  # vLLM 0.10.2's own choice with FlashInfer installed
    assert any(
        "flashinfer-cudnn is not usable here: vLLM 0.10.2 has no way to use it" in n
        for n in r.notes
    )


# --- accepted values, case-sensitive, per era ----------------------------------------------------

VALUES = [
    ("0.14.1", "marlin", False),
    ("0.15.1", "marlin", True),
    ("0.19.1", "emulation", False),
    ("0.20.0", "emulation", True),
    ("0.21.0", "flashinfer-b12x", False),
    ("0.22.0", "flashinfer-b12x", True),
    ("0.23.0", "flashinfer-b12x", True),
    ("0.15.1", "flashinfer-cudnn", True),
    ("0.15.1", "FLASHINFER-CUDNN", False),  # env_with_choices is case-sensitive
    ("0.15.1", "flashinfer_cudnn", False),  # the CLI spelling is not the env spelling
    ("0.15.1", "", False),  # an empty value counts as set, and invalid
]


@pytest.mark.parametrize(("version", "value", "accepted"), VALUES)
def test_vllm_nvfp4_gemm_backend_values(version: str, value: str, accepted: bool) -> None:
    ev = judge("b200", version, VLLM_NVFP4_GEMM_BACKEND=value)
    status, reason = finding(ev, "env.VLLM_NVFP4_GEMM_BACKEND")
    if accepted:
        assert status is Status.PASS and f"selects {value}" in reason
    else:
        assert status is Status.FAIL
        assert "is not a valid choice" in reason and "ValueError" in reason


def test_wrong_case_suggests_the_right_spelling() -> None:
    ev = judge("b200", "0.15.1", VLLM_NVFP4_GEMM_BACKEND="FlashInfer-cuDNN")
    f = next(f for f in ev.env_findings if f.id == "env.VLLM_NVFP4_GEMM_BACKEND")
    assert "Did you mean 'flashinfer-cudnn'?" in f.reason
    assert f.fix == "export VLLM_NVFP4_GEMM_BACKEND=flashinfer-cudnn"


def test_env_var_is_gone_from_0_24() -> None:
    ev = judge("b200", "0.24.0", VLLM_NVFP4_GEMM_BACKEND="flashinfer-cudnn")
    status, reason = finding(ev, "env.VLLM_NVFP4_GEMM_BACKEND")
    assert status is Status.WARN and "vLLM 0.24.0 ignores VLLM_NVFP4_GEMM_BACKEND" in reason
    fix = next(f.fix for f in ev.env_findings if f.id == "env.VLLM_NVFP4_GEMM_BACKEND")
    assert fix == "unset VLLM_NVFP4_GEMM_BACKEND; use --linear-backend flashinfer_cudnn"


def test_deprecated_in_0_22_but_still_honoured() -> None:
    ev = judge("b200", "0.22.0", VLLM_NVFP4_GEMM_BACKEND="flashinfer-cudnn")
    assert finding(ev, "env.VLLM_NVFP4_GEMM_BACKEND")[0] is Status.PASS
    status, reason = finding(ev, "env.VLLM_NVFP4_GEMM_BACKEND.deprecated")
    assert status is Status.WARN and "--linear-backend" in reason
    assert ev.env_selection is not None and ev.env_selection.backend == "flashinfer-cudnn"


def test_never_released_cudnn_variable_points_at_the_knob_that_works() -> None:
    for version, knob in [
        ("0.15.1", "VLLM_NVFP4_GEMM_BACKEND=flashinfer-cudnn"),
        ("0.30.0", "--linear-backend flashinfer_cudnn"),
    ]:
        ev = judge("b200", version, VLLM_USE_CUDNN_FP4_GEMM="1")
        f = next(f for f in ev.env_findings if f.id == "env.VLLM_USE_CUDNN_FP4_GEMM")
        assert f.status is Status.WARN
        assert f"vLLM {version} ignores VLLM_USE_CUDNN_FP4_GEMM" in f.reason
        assert "never released" in f.reason
        assert f.fix == f"unset VLLM_USE_CUDNN_FP4_GEMM; use {knob}"


def test_trtllm_bool_only_in_0_10_1_to_0_11_0() -> None:
    ev = judge("b200", "0.10.2", VLLM_USE_TRTLLM_FP4_GEMM="1")
    assert ev.env_selection is not None and ev.env_selection.backend == "flashinfer-trtllm"
    ev = judge("b200", "0.15.1", VLLM_USE_TRTLLM_FP4_GEMM="1")
    f = next(f for f in ev.env_findings if f.id == "env.VLLM_USE_TRTLLM_FP4_GEMM")
    assert f.status is Status.WARN
    assert f.fix == "unset VLLM_USE_TRTLLM_FP4_GEMM; use VLLM_NVFP4_GEMM_BACKEND=flashinfer-trtllm"


def test_int_parsed_bools_reject_words() -> None:
    ev = judge("b200", "0.16.0", VLLM_USE_FBGEMM="yes")
    status, reason = finding(ev, "env.VLLM_USE_FBGEMM")
    assert status is Status.FAIL and "not a number" in reason


# --- precedence --------------------------------------------------------------------------------


def test_fbgemm_overrides_the_backend_variable_from_0_16() -> None:
    ev = judge("b200", "0.16.0", VLLM_USE_FBGEMM="1", VLLM_NVFP4_GEMM_BACKEND="flashinfer-cudnn")
    assert ev.env_selection is not None and ev.env_selection.backend == "fbgemm"
    status, reason = finding(ev, "env.VLLM_NVFP4_GEMM_BACKEND.overridden")
    assert status is Status.WARN and "VLLM_USE_FBGEMM=1 takes precedence" in reason
    # fbgemm-gpu-genai is not installed on the fixture: the variable selects a dead backend.
    status, reason = finding(ev, "env.VLLM_USE_FBGEMM.backend")
    assert status is Status.FAIL and "fbgemm-gpu-genai is not installed" in reason


def test_batch_invariant_overrides_everything_from_0_20_and_is_never_set() -> None:
    ev = judge("b200", "0.20.0", VLLM_BATCH_INVARIANT="1", VLLM_NVFP4_GEMM_BACKEND="marlin")
    assert ev.env_selection is not None and ev.env_selection.variable == "VLLM_BATCH_INVARIANT"
    assert finding(ev, "env.VLLM_NVFP4_GEMM_BACKEND.overridden")[0] is Status.WARN
    r = resolve(ev, prefer="emulation")
    assert r.chosen == "emulation"
    assert r.set_env == (("VLLM_NVFP4_GEMM_BACKEND", "emulation"),)
    assert "VLLM_BATCH_INVARIANT" in r.unset_env


def test_emulation_is_selected_by_ct_emulations_in_0_16_to_0_19() -> None:
    r = resolve(judge("b200", "0.16.0"), prefer="emulation")
    assert r.set_env == (("VLLM_USE_NVFP4_CT_EMULATIONS", "1"),)
    assert "VLLM_USE_FBGEMM" in r.unset_env


def test_variable_selecting_an_invalid_backend_fails() -> None:
    ev = judge("h100", "0.15.1", VLLM_NVFP4_GEMM_BACKEND="flashinfer-trtllm")
    status, reason = finding(ev, "env.VLLM_NVFP4_GEMM_BACKEND.backend")
    assert status is Status.FAIL and "compute capability 9.0" in reason


# --- the engine's own automatic order ---------------------------------------------------------


@pytest.mark.parametrize(
    ("fixture", "version", "expected_auto", "chosen", "knob"),
    [
        # The engine's own choice is valid: nothing is pinned (no knob), only conflicts unset.
        ("b200", "0.15.1", "flashinfer-cutlass", "flashinfer-cutlass", None),
        # Hopper with FlashInfer: 0.10.1-0.15 pick flashinfer-cutlass with no CC gate.
        ("h100", "0.15.1", "flashinfer-cutlass", "marlin", ("VLLM_NVFP4_GEMM_BACKEND", "marlin")),
        ("h100", "0.11.1", "flashinfer-cutlass", None, None),  # no knob for Marlin before 0.15
        ("h100", "0.16.0", "marlin", "marlin", None),
        ("h100", "0.33.0", "marlin", "marlin", None),
        ("a100", "0.33.0", "marlin", "marlin", None),
        ("l40s", "0.20.0", "marlin", "marlin", None),
    ],
)
def test_automatic_order(
    fixture: str, version: str, expected_auto: str, chosen: str | None, knob: tuple[str, str] | None
) -> None:
    ev = judge(fixture, version)
    assert engine_auto(ev) == expected_auto
    r = resolve(ev)
    assert r.chosen == chosen
    assert (r.set_env + r.cli_args) == ((knob,) if knob else ())
    warned = any(f.id == "resolve.engine_auto" for f in r.findings)
    assert warned == (not ev.valid(expected_auto))


def test_hopper_0_15_says_vllm_alone_would_crash() -> None:
    r = resolve(judge("h100", "0.15.1"))
    f = next(f for f in r.findings if f.id == "resolve.engine_auto")
    # As set (no knob selects another backend) the engine's own pick decides: a failure.
    assert "as set, vLLM 0.15.1 picks flashinfer-cutlass by itself, which cannot run here" in (
        f.reason
    )
    assert "compute capability 9.0" in f.reason and f.status is Status.FAIL


# --- hosts -------------------------------------------------------------------------------------


def test_h200_style_hopper_refuses_every_native_backend_with_the_cc_reason() -> None:
    ev = judge("h100")
    for name, backend in ev.profile.backends.items():
        verdict = ev.verdicts[name]
        if backend.native:
            assert not verdict.valid, name
            problem = verdict.first_problem()
            assert problem is not None and "compute capability 9.0" in problem.reason, name
    assert resolve(ev).chosen == "marlin"


def test_cpu_host_says_no_gpu_for_every_backend() -> None:
    ev = judge("cpu")
    assert finding(ev, "host.gpus")[0] is Status.FAIL
    for verdict in ev.verdicts.values():
        problem = verdict.first_problem()
        assert problem is not None and "no NVIDIA GPU is visible" in problem.reason
    r = resolve(ev)
    assert r.chosen is None and not r.ready


def test_mixed_host_is_valid_only_where_valid_on_every_gpu() -> None:
    ev = judge("mixed", "0.33.0")
    assert finding(ev, "host.gpus.mixed")[0] is Status.WARN
    cudnn = ev.verdicts["flashinfer-cudnn"]
    per_gpu = {f.gpu: f.status for f in cudnn.findings if ".compute_capability." in f.id}
    assert per_gpu == {0: Status.PASS, 1: Status.FAIL}
    assert not cudnn.valid
    assert resolve(ev).chosen == "marlin"


def test_old_cudnn_refuses_cudnn_with_measured_and_required() -> None:
    ev = judge("b200-old-cudnn", "0.15.1")
    status, reason = finding(ev, "backend.flashinfer-cudnn.cudnn_backend")
    assert status is Status.FAIL
    assert "cuDNN backend 9.8.0; needs cuDNN backend >=9.10.2" in reason
    r = resolve(ev, prefer="cudnn")
    assert r.chosen != "flashinfer-cudnn"
    assert any("cuDNN backend 9.8.0" in n for n in r.notes)


def test_no_flashinfer_falls_back_to_vllm_cutlass() -> None:
    ev = judge("b200-no-flashinfer", "0.15.1")
    assert not ev.valid("flashinfer-cudnn")
    assert engine_auto(ev) == "cutlass"
    assert resolve(ev).chosen == "cutlass"


def test_no_nvcc_no_cubin_means_vllm_ignores_flashinfer() -> None:
    ev = judge("b200-no-nvcc-no-cubin", "0.15.1")
    status, _ = finding(ev, "backend.flashinfer-cudnn.flashinfer_kernels")
    assert status is Status.FAIL
    assert engine_auto(ev) == "cutlass"


def test_ignore_downgrades_and_still_shows() -> None:
    ev = evaluate(VLLM, host("h100"), ignore=["backend.flashinfer-cudnn"])
    assert ev.valid("flashinfer-cudnn")
    ignored = [f for f in ev.verdicts["flashinfer-cudnn"].findings if f.ignored]
    assert ignored and all(f.status is Status.WARN for f in ignored)


def test_unknown_backend_lists_the_valid_ones() -> None:
    with pytest.raises(
        ResolveError, match=r"unknown backend 'cudnnn'.*valid: .*flashinfer-cudnn, cudnn"
    ):
        resolve(judge("b200"), prefer="cudnnn")


def test_require_native_fails_on_hopper() -> None:
    r = resolve(judge("h100"), require="native")
    assert r.chosen is None and not r.ready  # Marlin is valid, but not native FP4
    assert any(f.id == "resolve.require" and f.status is Status.FAIL for f in r.findings)


def test_require_names_the_backend_and_chooses_it_when_valid() -> None:
    # Without --prefer: the required backend is chosen, not merely compared with the default.
    r = resolve(judge("b200", "0.15.1"), require="cudnn")
    assert r.chosen == "flashinfer-cudnn" and r.ready
    assert r.set_env == (("VLLM_NVFP4_GEMM_BACKEND", "flashinfer-cudnn"),)
    # --require native with a non-native preference picks the best native backend instead.
    r = resolve(judge("b200", "0.15.1"), require="native", prefer="marlin")
    assert r.chosen is not None and VLLM.backends[r.chosen].native and r.ready


def test_engine_not_installed_resolves_for_the_newest_known() -> None:
    ev = evaluate(VLLM, dataclasses.replace(host("h100"), packages=facts.PackageFacts(versions={})))
    assert ev.engine.version == VLLM.engine.newest_known
    assert ev.engine.note is not None and "vllm is not installed" in ev.engine.note


def test_an_unreadable_version_keeps_the_hardware_rules() -> None:
    base = host("h100")
    versions = {**base.packages.versions, "flashinfer-python": "unknown"}
    broken = dataclasses.replace(
        base, packages=dataclasses.replace(base.packages, versions=versions)
    )
    ev = evaluate(VLLM, broken, override_version="0.15.1")
    problem = ev.verdicts["flashinfer-cudnn"].first_problem()
    assert problem is not None and "compute capability 9.0" in problem.reason
    assert finding(ev, "host.package.flashinfer-python.version")[0] is Status.WARN


def test_fbgemm_is_unset_in_0_15_because_the_backend_variable_turns_it_on() -> None:
    ev = judge("b200", "0.15.1", VLLM_USE_FBGEMM="1", VLLM_NVFP4_GEMM_BACKEND="flashinfer-cudnn")
    status, reason = finding(ev, "env.VLLM_NVFP4_GEMM_BACKEND.overridden")
    assert status is Status.WARN and "compressed-tensors checkpoints only" in reason
    r = resolve(ev, prefer="cudnn")
    assert "VLLM_USE_FBGEMM" in r.unset_env


# --- vLLM 0.34 (the wheel's init_nvfp4_linear_kernel, envs.py, experts/cutlass_moe.py) ---------


def test_marlin_input_dtype_is_an_error_from_0_34_and_read_before() -> None:
    ev = judge("b200", "0.34.0", VLLM_MARLIN_INPUT_DTYPE="int8")
    status, reason = finding(ev, "env.VLLM_MARLIN_INPUT_DTYPE.removed")
    assert status is Status.FAIL and "refuses to start" in reason
    older = judge("b200", "0.33.0", VLLM_MARLIN_INPUT_DTYPE="int8")
    assert not [f for f in older.env_findings if "VLLM_MARLIN_INPUT_DTYPE" in f.id]
    assert "VLLM_MARLIN_INPUT_DTYPE" in resolve(judge("b200", "0.34.0")).unset_env
    assert "VLLM_MARLIN_INPUT_DTYPE" not in resolve(judge("b200", "0.33.0")).unset_env


def test_env_says_why_it_unsets_batch_invariant() -> None:
    r = resolve(judge("b200", "0.34.0", VLLM_BATCH_INVARIANT="1"))
    assert "VLLM_BATCH_INVARIANT" in r.unset_env
    (why,) = [n for n in r.notes if n.startswith("unsets VLLM_BATCH_INVARIANT")]
    assert "Humming for a W4A16 checkpoint" in why
    # Not set here, it is still unset (the output may be applied where it is set), and the
    # reason is said: once a bare `unset -v VLLM_BATCH_INVARIANT` (issue 42).
    quiet = resolve(judge("b200", "0.34.0"))
    assert "VLLM_BATCH_INVARIANT" in quiet.unset_env
    (why,) = [n for n in quiet.notes if "VLLM_BATCH_INVARIANT" in n]
    assert why.startswith("unsets VLLM_BATCH_INVARIANT (not set here): ")
    assert "Humming for a W4A16 checkpoint" in why


def test_vllm_cutlass_moe_leaves_sm110_in_0_34() -> None:
    def moe(version: str) -> Evaluation:
        return evaluate(VLLM, host("thor"), override_version=version, family="moe")

    assert moe("0.33.0").valid("cutlass-moe")
    assert "cutlass-moe" in moe("0.33.0").auto_order
    assert not moe("0.34.0").valid("cutlass-moe")
    assert "cutlass-moe" not in moe("0.34.0").auto_order


# --- releases newer than the release data -------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "verified"),
    [
        ("0.34.0", True),
        ("0.34.0rc1", True),
        ("0.34.0+cu130", True),
        ("0.34.1.dev3", False),
        ("0.40.0", False),
    ],
)
def test_a_release_newer_than_the_data_is_unverified(version: str, verified: bool) -> None:
    ev = judge("b200", version)
    assert ev.verified is verified
    marked = [f for f in ev.host if f.id == "engine.unverified.vllm"]
    assert bool(marked) is not verified
    if not verified:
        assert ev.unverified == (Unverified("vllm", version, VLLM.engine.newest_known),)
        assert marked[0].status is Status.WARN and "extrapolated" in marked[0].reason


def test_a_flashinfer_newer_than_its_data_makes_the_vllm_verdict_unverified() -> None:
    h = host("b200")
    newest = dict(VLLM.engine.newest_read)["flashinfer-python"]
    newer = f"{Version(newest).major}.{Version(newest).minor}.{Version(newest).micro + 1}"
    versions = {**h.packages.versions, "flashinfer-python": newer, "flashinfer-cubin": newer}
    h = dataclasses.replace(h, packages=dataclasses.replace(h.packages, versions=versions))
    ev = evaluate(VLLM, h, override_version="0.34.0", family="moe")
    assert [u.package for u in ev.unverified] == ["flashinfer-python"]


@pytest.mark.parametrize("package", ["nvidia-cudnn-frontend", "nvidia-cutlass-dsl"])
def test_a_cudnn_frontend_or_cutlass_dsl_newer_than_the_data_is_said_unverified(
    package: str,
) -> None:
    # Once judged as verified with no note, where a newer FlashInfer or engine gets one.
    h = host("b200")
    newest = dict(VLLM.engine.newest_read)[package]
    newer = f"{Version(newest).major}.{Version(newest).minor + 1}.0"
    versions = {**h.packages.versions, package: newer}
    h = dataclasses.replace(h, packages=dataclasses.replace(h.packages, versions=versions))
    ev = evaluate(VLLM, h, override_version="0.34.0", family="linear")
    assert [u.package for u in ev.unverified] == [package]
    (marked,) = [f for f in ev.host if f.id == f"engine.unverified.{package}"]
    assert marked.status is Status.WARN and "not verified" in marked.reason
    at_newest = dataclasses.replace(
        h, packages=dataclasses.replace(h.packages, versions={**versions, package: newest})
    )
    assert evaluate(VLLM, at_newest, override_version="0.34.0", family="linear").verified


def test_strict_makes_an_unverified_verdict_not_ready() -> None:
    def ask(version: str, strict: bool) -> Report:
        # A host whose FlashInfer runs the newer releases' own pick (b200.json's 0.6.1 does not:
        # as set, vLLM 0.34's pick would not run there).
        facts_file = str(HOSTS / "b200-vllm-0.33.json")
        return diagnose(
            Question(facts_file=facts_file, engine_version=version, family="linear", strict=strict)
        )

    assert ask("0.40.0", strict=False).outcome is Outcome.READY
    assert ask("0.40.0", strict=True).outcome is Outcome.NOT_READY
    assert ask("0.34.0", strict=True).outcome is Outcome.READY


def test_env_strict_exits_1_and_prints_nothing_for_an_unverified_release() -> None:
    args = ["env", "--facts", str(HOSTS / "b200.json"), "--family", "linear", "--strict"]
    result = CliRunner().invoke(main, [*args, "--engine-version", "0.40.0"])
    assert result.exit_code == 1 and result.stdout == ""
    assert "unverified" in result.stderr
    assert CliRunner().invoke(main, [*args, "--engine-version", "0.34.0"]).exit_code == 0


def test_the_json_report_marks_each_family_unverified() -> None:
    args = ["check", "--facts", str(HOSTS / "b200.json"), "--json", "--no-smoke"]
    document = json.loads(CliRunner().invoke(main, [*args, "--engine-version", "0.40.0"]).stdout)
    assert schema_errors(document) == []
    assert document["engine"]["verified"] is False
    assert document["engine"]["newest_known"] == VLLM.engine.newest_known
    for family in document["families"].values():
        assert family["verified"] is False
        assert family["unverified"][0]["newest_known"] == VLLM.engine.newest_known


def test_check_strict_says_why_it_is_not_ready() -> None:
    host = str(HOSTS / "b200-vllm-0.33.json")
    args = ["check", "--facts", host, "--no-smoke", "--family", "linear"]
    loose = CliRunner().invoke(main, [*args, "--engine-version", "0.40.0"])
    assert loose.exit_code == 0 and "(unverified: a release newer" in loose.stdout
    strict = CliRunner().invoke(main, [*args, "--engine-version", "0.40.0", "--strict"])
    assert strict.exit_code == 1 and "NOT READY: --strict" in strict.stdout


def test_prefer_and_require_naming_different_backends_is_said() -> None:
    # Once one won in silence.
    r = resolve(judge("b200", "0.34.0"), prefer="cudnn", require="trtllm")
    assert r.chosen == "flashinfer-trtllm"
    assert any("--prefer cudnn and --require trtllm name different backends" in n for n in r.notes)
    agreeing = resolve(judge("b200", "0.34.0"), prefer="trtllm", require="trtllm")
    assert not [n for n in agreeing.notes if "name different backends" in n]


def test_a_condition_that_begins_with_with_is_not_said_twice() -> None:
    # Once "possible wrong output with with --model: ..." (the MoE family's routing advisory).
    ev = evaluate(VLLM, host("b200"), override_version="0.34.0", family="moe")
    texts = [f.reason for v in ev.verdicts.values() for f in v.findings]
    assert any(t.startswith("possible ") and " with " in t for t in texts)
    assert not [t for t in texts if "with with" in t]
