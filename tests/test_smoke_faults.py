"""Fault injection: each labelled fake (tests/smoke_fakes.py) misbehaves in a real worker and
must become the right result, without stopping the adapters after it or leaving processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from processes import still_alive as _still_alive
from smoke_fakes import CRASHES, HAS_TORCH, NO_TORCH, WRONG_ANSWERS, FakeRun, fake_env, run_fakes

from fp4doctor.smoke import Prestarted, SmokeResult, run_smoke
from fp4doctor.smoke import runner as smoke_runner

needs_torch = pytest.mark.skipif(not HAS_TORCH, reason=NO_TORCH)

# The hang's timeout. It bounds every adapter of its run, so the adapter after the hang is a
# fake that answers at once (a real GEMM could need longer on a loaded CPU); even so the
# harness builds its test case first, which takes over a second on a loaded 2-core host.
TIMEOUT_S = 3.0


def _recorded(pid_dir: Path, prefix: str = "") -> dict[str, list[int]]:
    """name.pid files written by the fakes -> the pids in them."""
    return {
        p.name: [int(x) for x in p.read_text().split()]
        for p in sorted(pid_dir.iterdir())
        if p.name.startswith(prefix)
    }


# The wrong answers and the crashes are read from one run shared with tests/test_faults_smoke.py
# (`fault_run` in tests/conftest.py, in the order of smoke_fakes.FAULT_RUN).


@pytest.fixture(scope="module")
def wrong_answers(fault_run: FakeRun) -> FakeRun:
    return fault_run


@pytest.fixture(scope="module")
def crashes(fault_run: FakeRun) -> FakeRun:
    return fault_run


def _run_hang(pid_dir: Path) -> FakeRun:
    return run_fakes(["fake-hang", "fake-where"], pid_dir, timeout_s=TIMEOUT_S)


# Started in the background once collection ends (tests/conftest.py, `prefetched`): most of
# its seconds are the timeout and two workers' `import torch`, all measured inside the run.
PREFETCH = {"hang": _run_hang} if HAS_TORCH else {}


@pytest.fixture(scope="module")
def hang(prefetched: Callable[..., FakeRun]) -> FakeRun:
    if not HAS_TORCH:
        pytest.skip(NO_TORCH)
    return prefetched(__name__, "hang", _run_hang)


# --- wrong answers: status fail, with the numbers -------------------------------------------


def test_a_wrong_result_fails_with_its_max_error(wrong_answers: FakeRun) -> None:
    r = wrong_answers["fake-wrong"]
    assert r.status == "fail"
    assert r.reason.startswith("m=128 n=256 k=512: max |out-ref| = ")
    assert r.max_abs_err is not None and r.tolerance is not None
    assert r.max_abs_err > r.tolerance
    assert r.norm_ratio == pytest.approx(1.0, abs=0.01)  # right size, wrong places


def test_a_result_30x_too_small_fails_on_the_norm_ratio(wrong_answers: FakeRun) -> None:
    r = wrong_answers["fake-30x-small"]
    assert r.status == "fail"
    assert "output 30.0x too small: ||out||/||ref|| = 0.0333 (needs 0.9–1.1)" in r.reason
    assert r.norm_ratio == pytest.approx(1 / 30, rel=0.01)


def test_a_half_unwritten_output_fails_with_the_count(wrong_answers: FakeRun) -> None:
    r = wrong_answers["fake-unwritten"]
    assert r.status == "fail"
    assert r.unwritten == 128 * 128
    assert r.reason == "m=128 n=256 k=512: 16384 of 32768 outputs never written (NaN)"


def test_a_library_exception_fails_in_the_librarys_words(wrong_answers: FakeRun) -> None:
    r = wrong_answers["fake-raises"]
    assert r.status == "fail"
    assert r.reason == (
        "RuntimeError: FAKE library error: no kernel for this device … "
        "Reason: FAKE engine is only supported since Blackwell architecture"
    )
    assert r.library_error is not None and "detail line one" in r.library_error
    assert r.shapes == [[128, 256, 512]]


def test_a_kernel_right_once_but_wrong_on_repeated_calls_fails(wrong_answers: FakeRun) -> None:
    r = wrong_answers["fake-flaky"]
    assert r.status == "fail"
    assert r.reason.startswith(
        "m=128 n=256 k=512: the first call was right, repeated calls not: output 30.0x too small"
    )


def test_an_unknown_adapter_is_an_error(wrong_answers: FakeRun) -> None:
    r = wrong_answers["no-such-adapter"]
    assert r.status == "error"
    assert r.reason.startswith("unknown smoke adapter 'no-such-adapter' (known: emulation, ")


def test_wrong_answers_do_not_stop_the_next_adapter(wrong_answers: FakeRun) -> None:
    names = [r.adapter for r in wrong_answers.results]
    assert names[: len(WRONG_ANSWERS) + 1] == [*WRONG_ANSWERS, "fake-abort"]
    assert wrong_answers["fake-abort"].status == "error"  # it ran, and crashed as it should
    # No crash among them, so no restart: they and the adapter after them shared one worker.
    fakes = [*(n for n in WRONG_ANSWERS if n.startswith("fake-")), "fake-abort"]
    assert len({wrong_answers.worker_of(name) for name in fakes}) == 1


# --- crashes and hangs: status error, a fresh worker for the rest ---------------------------


def test_an_abort_is_an_error_naming_sigabrt(crashes: FakeRun) -> None:
    r = crashes["fake-abort"]
    assert r.status == "error"
    assert r.reason == "crashed: worker killed by SIGABRT (signal 6)"
    assert r.library_error is not None and "Fatal Python error: Aborted" in r.library_error


def test_a_segfault_is_an_error_naming_sigsegv(crashes: FakeRun) -> None:
    r = crashes["fake-segfault"]
    assert r.status == "error"
    assert r.reason == "crashed: worker killed by SIGSEGV (signal 11)"
    assert r.library_error is not None and "Segmentation fault" in r.library_error


def test_the_adapter_after_the_crashes_still_runs_and_passes(crashes: FakeRun) -> None:
    names = [r.adapter for r in crashes.results]
    after = names[names.index("fake-segfault") + 1]
    assert names.index("fake-segfault") == names.index("fake-abort") + 1
    assert crashes[after].status == "error" and crashes[after].reason.startswith("out of memory")
    assert names[-2:] == ["emulation", "fake-collector"] and crashes["emulation"].status == "pass"
    # Each crash cost its worker: two fakes, two different worker processes, and the adapter
    # after the segfault ran in a third.
    workers = [crashes.worker_of(name) for name in (*CRASHES, after)]
    assert len(set(workers)) == 3


def test_a_worker_runs_with_the_garbage_collector_off(crashes: FakeRun) -> None:
    """The worker holds the cyclic collector off for its life (a quarter of `import torch`)."""
    r = crashes["fake-collector"]
    assert (r.status, r.reason) == ("skip", "collector: off")


def test_a_hang_times_out_on_time(hang: FakeRun) -> None:
    r = hang["fake-hang"]
    assert r.status == "error"
    assert r.reason == f"timed out after {TIMEOUT_S:g} s; the worker was killed"
    # From the moment the fake started (its pid file) to the result: not before the timeout. No
    # upper bound: a wall-clock budget fails on a busy machine, and the reason above says which
    # budget ended it (a run waiting for another would outlast pytest's own timeout).
    (started,) = [p for p in hang.pid_dir.iterdir() if p.name.startswith("fake-hang.")]
    (ended,) = [t for t, res in hang.arrived if res.adapter == "fake-hang"]
    assert ended - started.stat().st_mtime >= TIMEOUT_S - 1.0


def test_the_adapter_after_a_hang_runs_in_a_fresh_worker(hang: FakeRun) -> None:
    assert [r.adapter for r in hang.results] == ["fake-hang", "fake-where"]
    assert (hang["fake-where"].status, hang["fake-where"].reason) == (
        "skip",
        "where: CUDA_VISIBLE_DEVICES=''",
    )
    workers = {pids[0] for name, pids in _recorded(hang.pid_dir).items() if "child" not in name}
    assert len(workers) == 2


@pytest.mark.parametrize(("run", "processes"), [("crashes", 4), ("hang", 3)])
def test_no_process_outlives_the_run(
    run: str, processes: int, request: pytest.FixtureRequest
) -> None:
    pid_dir = request.getfixturevalue(run).pid_dir
    pids = {p for pids in _recorded(pid_dir).values() for p in pids}
    # The workers of the fakes (crashes: the wrong answers' and the abort's, the segfault's,
    # the out-of-memory cases', the collector's after them), and the hang's own child.
    assert len(pids) == processes
    assert _still_alive(pids) == []


# --- start-up and GEMM budgets ----------------------------------------------------------------


@needs_torch
def test_a_slow_library_import_is_start_up_not_the_gemms_timeout(tmp_path: Path) -> None:
    """A 4.5 s import under a 3 s --smoke-timeout: the import has the start-up budget, so the
    adapter passes and the next one shares its worker (no restart paying start-up again)."""
    run = run_fakes(["fake-slow-import", "fake-where"], tmp_path, timeout_s=3.0)
    assert [(r.adapter, r.status) for r in run.results] == [
        ("fake-slow-import", "pass"),
        ("fake-where", "skip"),
    ]
    workers = {pids[0] for name, pids in _recorded(tmp_path).items() if "child" not in name}
    assert len(workers) == 1


@needs_torch
def test_a_hung_library_import_is_killed_at_the_start_up_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(smoke_runner, "IMPORT_TIMEOUT_S", 3.0)
    # The reason names the budget that fired (no wall-clock budget here: a run that waited for
    # another one would not end before pytest's own timeout).
    run = run_fakes(["fake-hung-import", "fake-where"], tmp_path, timeout_s=2.0)
    r = run["fake-hung-import"]
    assert (r.status, r.reason) == (
        "error",
        "importing its library did not finish within 3 s; the worker was killed",
    )
    # The next adapter ran in a fresh worker (its GEMM budget may not fit a loaded host).
    assert run["fake-where"].reason != r.reason


# --- a worker prestarted while the probe and the rules run ------------------------------------


@needs_torch
def test_a_prestarted_worker_takes_the_first_job(tmp_path: Path) -> None:
    env = fake_env(tmp_path)
    prestarted = Prestarted(env=env)
    pid = prestarted._worker.pid  # type: ignore[union-attr]
    results = run_smoke(["fake-where", "fake-wrong"], [], env=env, prestarted=prestarted)
    assert [(r.adapter, r.status) for r in results] == [
        ("fake-where", "skip"),
        ("fake-wrong", "fail"),
    ]
    # Both ran in the prestarted worker, with the job's CUDA_VISIBLE_DEVICES ('' on the CPU).
    assert results[0].reason == "where: CUDA_VISIBLE_DEVICES=''"
    assert {pids[0] for pids in _recorded(tmp_path, "fake-").values()} == {pid}
    assert _still_alive([pid]) == []


def test_an_unused_or_unfitting_prestarted_worker_is_killed(tmp_path: Path) -> None:
    env = fake_env(tmp_path)
    unused = Prestarted(env=env)
    unfitting = Prestarted(env=env, allow_jit=True)  # a run without JIT cannot use it
    pids = [w.pid for w in (unused._worker, unfitting._worker) if w is not None]
    unused.close()
    run_smoke(["no-such-adapter"], [], env=env, prestarted=unfitting)
    assert len(pids) == 2 and _still_alive(pids) == []


@needs_torch
def test_diagnose_prestarts_a_worker_on_a_gpu_host_and_leaves_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """FAKE GPU host: the driver's GPU list is a temporary directory with one entry."""
    from fp4doctor import doctor, smoke

    gpus = tmp_path / "gpus"
    (gpus / "0000:01:00.0").mkdir(parents=True)
    monkeypatch.setattr(doctor, "DRIVER_GPUS", str(gpus))
    pids: list[int] = []

    class Spy(Prestarted):
        def __init__(self, **kwargs: bool) -> None:
            super().__init__(**kwargs)
            assert self._worker is not None
            pids.append(self._worker.pid)

    monkeypatch.setattr(smoke, "Prestarted", Spy)
    doctor.diagnose(doctor.Question(target="vllm", smoke=None))
    assert len(pids) == 1  # started, then taken by the live run or closed unused
    assert _still_alive(pids) == []
    doctor.diagnose(doctor.Question(target="vllm", smoke=False))
    assert len(pids) == 1  # --no-smoke: none


# --- the protocol ----------------------------------------------------------------------------


@needs_torch
def test_junk_on_a_workers_stdout_reaches_neither_the_protocol_nor_our_stdout(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    results = run_smoke(["fake-junk-stdout", "emulation"], [], env=fake_env(tmp_path))
    assert [(r.adapter, r.status) for r in results] == [
        ("fake-junk-stdout", "pass"),
        ("emulation", "pass"),
    ]
    assert capfd.readouterr().out == ""


# --- workers that never get going --------------------------------------------------------------


def _sitecustomize(tmp_path: Path, body: str) -> dict[str, str]:
    """An environment whose Python runs `body` at start-up, before the worker's code."""
    site_dir = tmp_path / "site"
    site_dir.mkdir()
    (site_dir / "sitecustomize.py").write_text(body)
    env = fake_env(tmp_path)
    env["PYTHONPATH"] = f"{site_dir}{os.pathsep}{env['PYTHONPATH']}"
    return env


def test_a_worker_that_never_starts_is_killed_and_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_background_runs: None
) -> None:
    monkeypatch.setattr(smoke_runner, "STARTUP_TIMEOUT_S", 1.5)
    pid_file = tmp_path / "stuck.pid"
    body = (
        f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\ntime.sleep(600)\n"
    )
    results = run_smoke(["emulation", "fake-wrong"], [], env=_sitecustomize(tmp_path, body))
    assert [(r.adapter, r.status) for r in results] == [
        ("emulation", "error"),
        ("fake-wrong", "error"),
    ]
    assert results[0].reason.startswith("the worker did not start within 1.5 s")
    assert _still_alive([int(pid_file.read_text())]) == []


def test_a_worker_that_dies_at_start_up_is_reported_once_per_adapter(tmp_path: Path) -> None:
    env = _sitecustomize(tmp_path, "import os\nos.abort()\n")
    results = run_smoke(["emulation", "fake-wrong"], [], env=env)
    assert [(r.adapter, r.status) for r in results] == [
        ("emulation", "error"),
        ("fake-wrong", "error"),
    ]
    assert results[0].reason == (
        "not run: the worker killed by SIGABRT (signal 6) before reaching it"
    )


def test_a_worker_is_not_waited_for_after_it_says_done(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its teardown after "done" (the kernel releasing a CUDA context: 0.13-0.2 s on an H200)
    is not the doctor's to wait for: a worker that would linger 60 s at its exit (FAKE: its
    `os._exit` made slow) is killed at once, not after the 10 s grace of a closed pipe."""
    pid_file = tmp_path / "lingering.pid"
    body = (
        f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
        "_exit = os._exit\n"
        "def _slow_exit(code):\n    time.sleep(60)\n    _exit(code)\n"
        "os._exit = _slow_exit\n"
    )
    # A grace no run outlives: waited for, it would outlast pytest's own timeout (no clock here).
    monkeypatch.setattr(smoke_runner, "EXIT_GRACE_S", 3600.0)
    results = run_smoke(["emulation", "fake-wrong"], [], env=_sitecustomize(tmp_path, body))
    assert [r.adapter for r in results] == ["emulation", "fake-wrong"]
    assert "crashed" not in " ".join(r.reason or "" for r in results)
    assert _still_alive([int(pid_file.read_text())]) == []


@pytest.mark.skipif(sys.version_info < (3, 11), reason="python -P is Python 3.11+")
def test_the_worker_imports_the_doctors_copy_not_one_in_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`python -m` puts the working directory first on sys.path: run from a directory that
    holds another fp4doctor (FAKE: a decoy whose worker would leave a mark), the worker must
    still be the doctor's own."""
    mark = tmp_path / "decoy-ran"
    decoy = tmp_path / "fp4doctor" / "smoke"
    decoy.mkdir(parents=True)
    (tmp_path / "fp4doctor" / "__init__.py").write_text("")
    (decoy / "__init__.py").write_text("")
    (decoy / "worker.py").write_text(f"open({str(mark)!r}, 'w').write('ran')\n")
    monkeypatch.chdir(tmp_path)
    results = run_smoke(["fake-wrong"], [], env=fake_env(tmp_path))
    assert not mark.exists()
    assert [r.adapter for r in results] == ["fake-wrong"]
    assert results[0].status in ("fail", "skip"), results[0]  # the fake's answer, or no torch


# --- Ctrl-C ------------------------------------------------------------------------------------

_INTERRUPTED = """
import json, sys
from fp4doctor.smoke import SmokeInterrupted, run_smoke
try:
    run_smoke(["emulation", "fake-hang"], [], timeout_s=120)
except SmokeInterrupted as exc:
    print(json.dumps([r.to_dict() for r in exc.results]))
    sys.exit(130)
sys.exit(1)
"""


@needs_torch
def test_ctrl_c_kills_every_worker_and_keeps_what_finished(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", _INTERRUPTED],
        env=fake_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not _recorded(tmp_path, "fake-hang-child.") and time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    finished = json.loads(out)
    assert [(r["adapter"], r["status"]) for r in finished] == [("emulation", "pass")]
    pids = {p for pids in _recorded(tmp_path).values() for p in pids}
    assert len(pids) == 2  # the worker and the hang's child
    assert _still_alive(pids) == []


@needs_torch
def test_a_failing_callback_stops_the_run_and_is_re_raised(tmp_path: Path) -> None:
    class Boom(Exception):
        pass

    def on_result(result: SmokeResult) -> None:
        raise Boom(result.adapter)

    with pytest.raises(Boom, match="fake-wrong"):
        run_smoke(
            ["fake-wrong", "fake-hang"],  # a first result at once, then a hang not waited for
            [],
            timeout_s=3600,  # waited for, it would outlast pytest's own timeout: no clock here
            env=fake_env(tmp_path),
            on_result=on_result,
        )
    pids = {p for pids in _recorded(tmp_path).values() for p in pids}
    assert _still_alive(pids) == []
