"""The engine oracle without a real engine: the cases asked, the answers folded into the report
(the engine's answer decides), the worker's refusal when no engine is installed, and verify-log
over the log lines the released wheels write. The real vLLM releases: tests/test_engine.py.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fp4doctor import facts, profile
from fp4doctor.findings import Status
from fp4doctor.logs import signatures
from fp4doctor.logs.reading import read_text
from fp4doctor.oracle import query, startup_log
from fp4doctor.oracle.answers import AS_SET, Answer, Case, EngineAnswers
from fp4doctor.rules import Evaluation, evaluate
from fp4doctor.selection.asked import fold
from fp4doctor.selection.choice import resolve
from fp4doctor.selection.engine import engine_auto

HOSTS = Path(__file__).parent / "fixtures" / "hosts"
ROOT = Path(__file__).resolve().parents[1]
VLLM = profile.load("vllm")


def judged(name: str, version: str, family: str, **env: str) -> Evaluation:
    host = dataclasses.replace(facts.load(HOSTS / f"{name}.json"), env=dict(env))
    return evaluate(VLLM, host, override_version=version, family=family)


def answered(
    ev: Evaluation, weight_only: bool = False, **picks: str | tuple[str, str]
) -> EngineAnswers:
    """FAKE engine answers (standing for a GPU we cannot have): `picks` maps a case label
    (`as_set`, or a backend) to the backend vLLM picks, or (exception type, message)."""
    got = {}
    cases = query.cases_for(ev, weight_only)
    for case in cases:
        name = "w4a16" if case.a16 else "as_set" if case.label == AS_SET else case.label
        pick = picks.get(name, str(engine_auto(ev)) if case.a16 else case.label)
        if isinstance(pick, tuple):
            got[case.key] = Answer(case.key, raised=pick[0], message=pick[1])
        else:
            got[case.key] = Answer(case.key, engine_name=pick.upper(), backend=pick)
    return EngineAnswers("vLLM", ev.engine.version, "vllm_0_24", got, cases=tuple(cases))


def ids(resolution_findings: tuple[object, ...]) -> dict[str, Status]:
    return {f.id: f.status for f in resolution_findings}  # type: ignore[attr-defined]


# --- the cases -------------------------------------------------------------------------------


def test_cases_ask_the_knobs_as_set_and_each_knob_set_env_would_write() -> None:
    ev = judged("b200-vllm-0.33", "0.33.0", "linear", VLLM_NVFP4_GEMM_BACKEND="cutlass")
    cases = query.cases_for(ev)
    as_set = [c for c in cases if c.label == AS_SET]
    assert [c.cc for c in as_set] == [(10, 0)]  # one per compute capability, not per GPU
    assert ("VLLM_NVFP4_GEMM_BACKEND", "cutlass") in as_set[0].set_env
    cudnn = next(c for c in cases if c.label == "flashinfer-cudnn")
    r = resolve(ev, prefer="flashinfer-cudnn")
    assert (
        cudnn.args
        == tuple(f"{k}={v}" for k, v in r.cli_args)
        == ("--linear-backend=flashinfer_cudnn",)
    )
    # What env unsets is unset in the question too: the variable as set must not decide.
    assert "VLLM_NVFP4_GEMM_BACKEND" in cudnn.unset_env
    assert all(k != "VLLM_NVFP4_GEMM_BACKEND" for k, _ in cudnn.set_env)
    assert len({c.key for c in cases}) == len(cases)


# --- folding: the engine's answer decides ----------------------------------------------------


def test_agreement_passes_and_changes_nothing() -> None:
    ev = judged("b200-vllm-0.33", "0.33.0", "moe")
    r = resolve(ev)
    folded = fold(answered(ev, as_set=str(engine_auto(ev))), ev, r)
    assert folded.chosen == r.chosen
    assert ids(folded.findings)["engine.oracle.moe"] is Status.PASS


def test_a_pick_the_rules_did_not_predict_is_a_finding_and_becomes_the_choice() -> None:
    # The case: vLLM 0.34 dropped SM110 from its CUTLASS experts; on Thor the rules
    # (0.33's) predict cutlass-moe and vLLM picks Marlin. Nothing to set: Marlin it is.
    ev = judged("thor", "0.33.0", "moe")
    r = resolve(ev)
    assert r.chosen == "cutlass-moe" and r.knob is None
    folded = fold(answered(ev, as_set="marlin-moe"), ev, r)
    assert folded.chosen == "marlin-moe"
    finding = next(f for f in folded.findings if f.id == "engine.oracle.moe")
    assert finding.status is Status.WARN
    assert "picks marlin-moe" in finding.reason and "predicted cutlass-moe" in finding.reason


def test_a_kernel_the_rules_do_not_know_is_said_and_left_to_the_engine() -> None:
    """SGLang picks flashinfer_trtllm_routed for Nemotron-H with EPLB on SM100
    (sglang/srt/arg_groups/model_overrides/nemotron_h.py, 0.5.23), a kernel no profile has:
    a warning that says it is not judged, and no knob steering the engine away from it."""
    ev = judged("b200-vllm-0.33", "0.33.0", "moe")
    r = resolve(ev)
    assert r.knob is None
    cases = query.cases_for(ev)
    got = {c.key: Answer(c.key, engine_name="FLASHINFER_TRTLLM_ROUTED") for c in cases
           if c.label == AS_SET}  # fmt: skip
    folded = fold(EngineAnswers("vLLM", "0.33.0", "vllm_0_24", got, cases=tuple(cases)), ev, r)
    assert folded.chosen == r.chosen and folded.knob is None
    finding = next(f for f in folded.findings if f.id == "engine.oracle.moe")
    assert finding.status is Status.WARN
    assert "do not know" in finding.reason and "not judged" in finding.reason
    assert "cannot run" not in finding.reason


def test_what_the_engine_raises_as_set_fails_and_a_knob_set_it_honours_is_chosen() -> None:
    ev = judged("b200-vllm-0.33", "0.33.0", "moe")
    r = resolve(ev)
    crash = ("ModuleNotFoundError", "No module named 'flashinfer'")
    folded = fold(answered(ev, as_set=crash, **{str(r.chosen): crash}), ev, r)
    assert ids(folded.findings)["engine.oracle.moe"] is Status.FAIL
    assert folded.chosen not in (None, r.chosen)
    assert folded.knob is not None  # a knob set the engine honours
    assert any("does not pick" in n for n in folded.notes)


def test_a_knob_set_the_engine_does_not_honour_falls_back() -> None:
    # --prefer flashinfer-cutedsl-w4a16 writes --linear-backend=flashinfer_cutedsl, and vLLM
    # picks the W4A4 CuTe-DSL kernel first (issue 26).
    ev = judged("b200-vllm-0.33", "0.33.0", "linear")
    r = resolve(ev, prefer="flashinfer-cutedsl-w4a16")
    assert r.chosen == "flashinfer-cutedsl-w4a16"
    got = answered(ev, **{"flashinfer-cutedsl-w4a16": "flashinfer-cutedsl"})
    folded = fold(got, ev, r)
    knobs = next(f for f in folded.findings if f.id == "engine.oracle.linear.knobs")
    # Said, not blocking: the choice steers around it.
    assert knobs.status is Status.WARN and "not flashinfer-cutedsl-w4a16" in knobs.reason
    assert folded.chosen != "flashinfer-cutedsl-w4a16"


def test_the_weight_only_layer_class_is_asked_as_such() -> None:
    ev = judged("b200-vllm-0.33", "0.33.0", "linear")
    a16 = [c for c in query.cases_for(ev, weight_only=True) if c.a16]
    assert [(c.label, c.cc) for c in a16] == [(AS_SET, (10, 0))]
    r = resolve(ev)
    folded = fold(answered(ev, True, w4a16="flashinfer-cutedsl-w4a16"), ev, r)
    finding = next(f for f in folded.findings if f.id == "engine.oracle.linear.w4a16")
    assert "weight-only (W4A16)" in finding.reason and "flashinfer-cutedsl-w4a16" in finding.reason
    assert finding.status is Status.WARN  # not what fp4doctor chooses for the W4A4 layers


def test_an_engine_that_cannot_be_asked_leaves_the_rules_answer_marked_unverified() -> None:
    ev = judged("b200-vllm-0.33", "0.33.0", "linear")
    r = resolve(ev)
    unasked = EngineAnswers("vLLM", "0.33.0", unasked="vllm/_C.abi3.so: libcuda.so.1 missing")
    folded = fold(unasked, ev, r)
    assert folded.chosen == r.chosen
    finding = next(f for f in folded.findings if f.id == "engine.oracle.linear")
    assert finding.status is Status.SKIP
    assert finding.reason.startswith("could not ask vLLM 0.33.0: ")
    assert "unverified" in finding.reason


def test_each_release_is_asked_by_the_adapter_that_read_it() -> None:
    from fp4doctor.oracle.worker import adapter_for

    assert adapter_for("vllm", "0.17.1") is None
    assert adapter_for("vllm", "0.23.0") == "fp4doctor.oracle.vllm_0_18"
    assert adapter_for("vllm", "0.35.0") == "fp4doctor.oracle.vllm_0_24"  # newer: the newest
    assert adapter_for("sglang", "0.5.15.post1") is None
    assert adapter_for("sglang", "0.5.18") == "fp4doctor.oracle.sglang_0_5_16"
    assert adapter_for("sglang", "0.5.23") == "fp4doctor.oracle.sglang_0_5_19"


def test_sglang_is_asked_for_the_model_given_and_not_for_weight_only_layers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """SGLang's resolution reads the model (its per-model overrides pick the MoE runner): the
    model's config.json goes to the worker with the job; its W4A16 linears follow
    --fp4-gemm-backend, so no separate weight-only case is asked. The worker is not started
    (Asking's thread is replaced: no SGLang here)."""
    started: list[query.Asking] = []
    monkeypatch.setattr(query, "installed", lambda package: True)
    monkeypatch.setattr(query.Asking, "_run", lambda self: started.append(self))
    host = facts.load(HOSTS / "b200.json")
    ev = evaluate(profile.load("sglang"), host, override_version="0.5.23", family="linear")
    config = {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3"}
    asking = query.start([ev], stub=True, weight_only={"linear"}, model=config)
    assert asking is not None and asking.engine == "sglang"
    asking._thread.join()
    assert started == [asking] and asking.model == config
    assert asking.cases and not any(c.a16 for c in asking.cases)
    vllm_ev = judged("b200-vllm-0.33", "0.33.0", "linear")
    vllm_asking = query.start([vllm_ev], stub=True, weight_only={"linear"})
    assert vllm_asking is not None and any(c.a16 for c in vllm_asking.cases)
    vllm_asking._thread.join()


# --- the worker, with no engine installed (the real worker, the real interpreter) -------------


def test_the_worker_says_why_it_cannot_ask_when_the_engine_is_not_installed() -> None:
    pytest.importorskip("click")
    try:
        from importlib import metadata

        metadata.distribution("vllm")
        pytest.skip("vllm is installed in this interpreter")
    except metadata.PackageNotFoundError:
        pass
    ev = judged("b200-vllm-0.33", "0.33.0", "linear")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FP4DOCTOR_CACHE_DIR": ""}
    asking = query.Asking(
        "vllm", "vLLM", "0.33.0", query.cases_for(ev), stub=True, package="vllm", env=env
    )
    got = asking.answers()
    assert got.unasked is not None and "vllm is not installed" in got.unasked


def test_check_with_an_engine_interpreter_that_lacks_it_says_could_not_ask() -> None:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        query.ENGINE_PYTHON_ENV: sys.executable,
        "FP4DOCTOR_CACHE_DIR": "",
    }
    if query.installed("vllm") and not os.environ.get(query.ENGINE_PYTHON_ENV):
        pytest.skip("vllm is installed in this interpreter")
    fixture = str(HOSTS / "b200-vllm-0.33.json")
    done = subprocess.run(
        [sys.executable, "-m", "fp4doctor", "check", "--facts", fixture, "-v"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert "could not ask vLLM 0.33.0: " in done.stdout
    assert "engine.oracle.linear" in done.stdout
    skipped = subprocess.run(
        [sys.executable, "-m", "fp4doctor", "check", "--facts", fixture, "-v", "--no-engine"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert "engine.oracle" not in skipped.stdout
    assert skipped.returncode == done.returncode


# --- verify-log ------------------------------------------------------------------------------

# The lines as the released wheels write them (see fp4doctor/oracle/startup_log.py for where).
LINES_0_18 = (
    "INFO 12-03 12:45:22 [nvfp4_utils.py:85] Using NvFp4LinearBackend.FLASHINFER_CUTLASS for "
    "NVFP4 GEMM\n"
    "INFO 12-03 12:45:23 [nvfp4.py:190] Using 'FLASHINFER_TRTLLM' NvFp4 MoE backend out of "
    "potential backends: ['FLASHINFER_TRTLLM', 'FLASHINFER_CUTEDSL', 'FLASHINFER_CUTLASS', "
    "'VLLM_CUTLASS', 'MARLIN'].\n"
)
LINES_0_34 = (
    "(EngineCore pid=1) INFO [__init__.py:1305] Using MarlinNvFp4LinearKernel for NVFP4 GEMM\n"
    "(EngineCore pid=1) INFO [base.py:166] Using MARLIN NvFp4 MoE backend out of potential "
    "backends: ['FLASHINFER_TRTLLM', 'MARLIN'].\n"
)
REFUSED = (
    "ValueError: NvFp4 MoE backend 'VLLM_CUTLASS' does not support the deployment "
    "configuration since kernel does not support current device cuda.\n"
)


def test_the_log_lines_of_each_release_name_the_kernels() -> None:
    reading = read_text(LINES_0_18 + LINES_0_34)
    ran, errors = reading.ran, reading.known_failures
    assert [(r.family, startup_log.backend_of(r)) for r in ran] == [
        ("linear", "flashinfer-cutlass"),
        ("moe", "flashinfer-trtllm-moe"),
        ("linear", "marlin"),
        ("moe", "marlin-moe"),
    ]
    assert errors == []


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        (REFUSED, "refused_backend"),
        (
            "RuntimeError: CUDA error: no kernel image is available for execution on the device",
            "no_kernel_image",
        ),
        (
            "OSError: libcudart.so.13: cannot open shared object file: No such file or directory",
            "cudart_loader",
        ),
        ("RuntimeError: Unable to load any libcudart.so.* library", "cudart_loader"),
        ("ModuleNotFoundError: No module named 'flashinfer'", "flashinfer_missing"),
        # SGLang 0.5.23's assertion, as real SGLang 0.5.16 and 0.5.23 raised it when asked
        # (tools/engine_agreement.py); the message's second line, a log line of its own.
        (
            "FlashInfer CuteDSL MOE currently supports only: 'modelopt_fp4', 'modelopt_mixed' "
            "(with NVFP4 MoE layers), 'nvfp4_online', or hybrid NVFP4 models.",
            "cutedsl_moe_quantization",
        ),
        (
            "ValueError: Failed to find a kernel that can implement the NVFP4 linear layer.",
            "no_linear_kernel",
        ),
    ],
)
def test_known_errors_get_their_diagnosis(line: str, kind: str) -> None:
    errors = read_text(f"INFO start\n{line}\n").known_failures
    assert [e.cause for e in errors] == [kind]
    assert errors[0].first.number == 2
    assert next(s for s in signatures.shipped() if s.id == kind).fix


def test_sglang_server_args_name_its_backends() -> None:
    line = (
        "[2026-12-03 10:00:00] server_args={'model_path': 'x', 'fp4_gemm_runner_backend': "
        "'auto', 'moe_runner_backend': 'flashinfer_cutlass'}"
    )
    ran = read_text(line).ran
    assert [(r.engine, r.family, r.engine_name) for r in ran] == [
        ("sglang", "linear", "auto"),
        ("sglang", "moe", "flashinfer_cutlass"),
    ]


def _verify(tmp_path: Path, text: str, *args: str) -> subprocess.CompletedProcess[str]:
    log = tmp_path / "vllm.log"
    log.write_text(text)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FP4DOCTOR_CACHE_DIR": ""}
    return subprocess.run(
        [sys.executable, "-m", "fp4doctor", "verify-log", str(log), "--no-engine", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def test_verify_log_agrees_with_the_prediction_and_exits_0(tmp_path: Path) -> None:
    # An H200 (9.0): fp4doctor predicts Marlin for both families with vLLM 0.33.
    text = (
        "INFO Using MarlinNvFp4LinearKernel for NVFP4 GEMM\n"
        "INFO Using 'MARLIN' NvFp4 MoE backend out of potential backends: ['MARLIN'].\n"
    )
    done = _verify(
        tmp_path, text, "--facts", str(HOSTS / "h200.json"), "--engine-version", "0.33.0"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "log.linear: log line 1: vllm ran marlin" in done.stdout
    assert "as fp4doctor predicts" in done.stdout


def test_verify_log_mismatch_and_a_refused_backend_exit_1_with_the_fix(tmp_path: Path) -> None:
    text = "INFO Using CutlassNvFp4LinearKernel for NVFP4 GEMM\n" + REFUSED
    done = _verify(
        tmp_path, text, "--facts", str(HOSTS / "h200.json"), "--engine-version", "0.33.0"
    )
    assert done.returncode == 1
    assert "cutlass cannot run here" in done.stdout
    assert "log.error.refused_backend" in done.stdout
    assert 'fix: eval "$(fp4doctor env)"' in done.stdout


def test_verify_log_of_an_unreadable_file_is_a_usage_error(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "fp4doctor", "verify-log", str(tmp_path / "missing.log")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr


class _Canned(query.Asking):
    """FAKE worker (standing for an engine install): counts how often it is started."""

    started = 0

    def _from_worker(self) -> EngineAnswers:
        type(self).started += 1
        return EngineAnswers("vLLM", self.judged, "vllm_0_24", cases=self.cases)


def test_the_answers_are_kept_for_a_long_question(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Ninety cases with their knobs: the kept entry's name must stay a plain short name.
    cases = [Case("as set", "linear", (10, 0), args=(f"--linear-backend={i}" * 4,))
             for i in range(90)]  # fmt: skip
    monkeypatch.setenv("FP4DOCTOR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(query.ENGINE_PYTHON_ENV, raising=False)
    for _ in range(2):
        asked = _Canned("vllm", "vLLM", "0.33.0", cases, stub=True, package="pyyaml",
                        packages=["packaging"], env=dict(os.environ))  # fmt: skip
        assert asked.answers().unasked is None
    assert _Canned.started == 1


def _dist_info(site: Path, name: str, version: str) -> None:
    """A package installed as pip lays it out (its dist-info; no code is needed to find it)."""
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "RECORD").write_text(f"{info.name}/METADATA,,\n")


def _asked_twice_then_after_an_install(env: dict[str, str], site: Path) -> list[int]:
    """How many workers ran after each of three runs: two alike, then one after FlashInfer's
    cubin package is installed beside the engine."""
    cases = [Case("as set", "linear", (12, 0))]
    started = []
    for step in range(3):
        if step == 2:
            _dist_info(site, "flashinfer-cubin", "0.6.9")
        asked = _Canned("vllm", "vLLM", "0.33.0", cases, stub=True, package="fake-engine",
                        packages=["fake-engine"], env=env)  # fmt: skip
        assert asked.answers().unasked is None
        started.append(_Canned.started)
    return started


def test_a_package_installed_after_the_answers_were_kept_asks_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The path fp4doctor's own fixes send users down: check, install what the fix names, check
    # again. The kept answer once described the install before the fix.
    site = tmp_path / "site"
    _dist_info(site, "fake-engine", "1.0")
    monkeypatch.setattr(sys, "path", [str(site), *sys.path])
    monkeypatch.setenv("FP4DOCTOR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(query.ENGINE_PYTHON_ENV, raising=False)
    if query.installed("flashinfer-cubin"):
        pytest.skip("flashinfer-cubin is installed in this interpreter")
    _Canned.started = 0
    assert _asked_twice_then_after_an_install(dict(os.environ), site) == [1, 1, 2]


def test_answers_from_an_engine_in_another_venv_are_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # FP4DOCTOR_ENGINE_PYTHON: fp4doctor installed with pipx, the engine in its own venv. The
    # other interpreter is this one behind a script, its packages in a directory of its own.
    site = tmp_path / "engine-site"
    _dist_info(site, "fake-engine", "1.0")
    python = tmp_path / "engine-venv" / "python"
    python.parent.mkdir()
    python.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    python.chmod(0o755)
    env = {**os.environ, query.ENGINE_PYTHON_ENV: str(python), "PYTHONPATH": str(site),
           "FP4DOCTOR_CACHE_DIR": str(tmp_path / "cache")}  # fmt: skip
    if query.installed("flashinfer-cubin") and not os.environ.get(query.ENGINE_PYTHON_ENV):
        pytest.skip("flashinfer-cubin is installed in this interpreter")
    monkeypatch.setenv("FP4DOCTOR_CACHE_DIR", env["FP4DOCTOR_CACHE_DIR"])  # cache.cached's
    _Canned.started = 0
    assert _asked_twice_then_after_an_install(env, site) == [1, 1, 2]
