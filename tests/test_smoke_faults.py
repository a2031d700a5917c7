"""Fault injection: each labelled fake (tests/smoke_fakes.py) misbehaves in a real worker and
must become the right result, without stopping the adapters after it or leaving processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from processes import still_alive as _still_alive
from smoke_fakes import fake_env

from fp4doctor.smoke import SmokeResult, run_smoke
from fp4doctor.smoke import runner as smoke_runner

TIMEOUT_S = 3.0


def _recorded(pid_dir: Path, prefix: str = "") -> dict[str, list[int]]:
    """name.pid files written by the fakes -> the pids in them."""
    return {
        p.name: [int(x) for x in p.read_text().split()]
        for p in sorted(pid_dir.iterdir())
        if p.name.startswith(prefix)
    }


@dataclass
class Run:
    results: list[SmokeResult]
    arrived: list[tuple[float, SmokeResult]]  # (wall-clock time, result) as on_result saw them
    pid_dir: Path

    def __getitem__(self, adapter: str) -> SmokeResult:
        (r,) = [r for r in self.results if r.adapter == adapter]
        return r


def _run(names: list[str], pid_dir: Path, timeout_s: float) -> Run:
    arrived: list[tuple[float, SmokeResult]] = []
    results = run_smoke(
        names,
        [],
        timeout_s=timeout_s,
        env=fake_env(pid_dir),
        on_result=lambda r: arrived.append((time.time(), r)),
    )
    return Run(results, arrived, pid_dir)


@pytest.fixture(scope="module")
def wrong_answers(tmp_path_factory: pytest.TempPathFactory) -> Run:
    names = [
        "fake-wrong",
        "fake-30x-small",
        "fake-unwritten",
        "fake-raises",
        "fake-flaky",
        "no-such-adapter",
        "emulation",
    ]
    return _run(names, tmp_path_factory.mktemp("pids"), timeout_s=60)


@pytest.fixture(scope="module")
def crashes(tmp_path_factory: pytest.TempPathFactory) -> Run:
    names = ["fake-abort", "fake-segfault", "emulation"]
    return _run(names, tmp_path_factory.mktemp("pids"), timeout_s=60)


@pytest.fixture(scope="module")
def hang(tmp_path_factory: pytest.TempPathFactory) -> Run:
    # The timeout applies to every adapter of a run; a short one would also cut a real GEMM
    # on a loaded CPU, so the adapter after the hang is a fake that answers at once.
    names = ["fake-hang", "fake-where"]
    return _run(names, tmp_path_factory.mktemp("pids"), timeout_s=TIMEOUT_S)


# --- wrong answers: status fail, with the numbers -------------------------------------------


def test_a_wrong_result_fails_with_its_max_error(wrong_answers: Run) -> None:
    r = wrong_answers["fake-wrong"]
    assert r.status == "fail"
    assert r.reason.startswith("m=128 n=256 k=512: max |out-ref| = ")
    assert r.max_abs_err is not None and r.tolerance is not None
    assert r.max_abs_err > r.tolerance
    assert r.norm_ratio == pytest.approx(1.0, abs=0.01)  # right size, wrong places


def test_a_result_30x_too_small_fails_on_the_norm_ratio(wrong_answers: Run) -> None:
    r = wrong_answers["fake-30x-small"]
    assert r.status == "fail"
    assert "output 30.0x too small: ||out||/||ref|| = 0.0333 (needs 0.9–1.1)" in r.reason
    assert r.norm_ratio == pytest.approx(1 / 30, rel=0.01)


def test_a_half_unwritten_output_fails_with_the_count(wrong_answers: Run) -> None:
    r = wrong_answers["fake-unwritten"]
    assert r.status == "fail"
    assert r.unwritten == 128 * 128
    assert r.reason == "m=128 n=256 k=512: 16384 of 32768 outputs never written (NaN)"


def test_a_library_exception_fails_in_the_librarys_words(wrong_answers: Run) -> None:
    r = wrong_answers["fake-raises"]
    assert r.status == "fail"
    assert r.reason == (
        "RuntimeError: FAKE library error: no kernel for this device … "
        "Reason: FAKE engine is only supported since Blackwell architecture"
    )
    assert r.library_error is not None and "detail line one" in r.library_error
    assert r.shapes == [[128, 256, 512]]


def test_a_kernel_right_once_but_wrong_on_repeated_calls_fails(wrong_answers: Run) -> None:
    r = wrong_answers["fake-flaky"]
    assert r.status == "fail"
    assert r.reason.startswith(
        "m=128 n=256 k=512: the first call was right, repeated calls not: output 30.0x too small"
    )


def test_an_unknown_adapter_is_an_error(wrong_answers: Run) -> None:
    r = wrong_answers["no-such-adapter"]
    assert r.status == "error"
    assert r.reason.startswith("unknown smoke adapter 'no-such-adapter' (known: emulation, ")


def test_wrong_answers_do_not_stop_the_next_adapter(wrong_answers: Run) -> None:
    assert wrong_answers["emulation"].status == "pass"
    workers = {pids[0] for pids in _recorded(wrong_answers.pid_dir).values()}
    assert len(workers) == 1  # no crash, so no restart


# --- crashes and hangs: status error, a fresh worker for the rest ---------------------------


def test_an_abort_is_an_error_naming_sigabrt(crashes: Run) -> None:
    r = crashes["fake-abort"]
    assert r.status == "error"
    assert r.reason == "crashed: worker killed by SIGABRT (signal 6)"
    assert r.library_error is not None and "Fatal Python error: Aborted" in r.library_error


def test_a_segfault_is_an_error_naming_sigsegv(crashes: Run) -> None:
    r = crashes["fake-segfault"]
    assert r.status == "error"
    assert r.reason == "crashed: worker killed by SIGSEGV (signal 11)"
    assert r.library_error is not None and "Segmentation fault" in r.library_error


def test_the_adapter_after_the_crashes_still_runs_and_passes(crashes: Run) -> None:
    assert [r.adapter for r in crashes.results] == ["fake-abort", "fake-segfault", "emulation"]
    assert crashes["emulation"].status == "pass"
    # Each crash cost its worker: two fakes, two different worker processes.
    workers = {pids[0] for pids in _recorded(crashes.pid_dir).values()}
    assert len(workers) == 2


def test_a_hang_times_out_on_time(hang: Run) -> None:
    r = hang["fake-hang"]
    assert r.status == "error"
    assert r.reason == f"timed out after {TIMEOUT_S:g} s; the worker was killed"
    # From the moment the fake started (its pid file) to the result: the timeout, plus slack.
    (started,) = [p for p in hang.pid_dir.iterdir() if p.name.startswith("fake-hang.")]
    (ended,) = [t for t, res in hang.arrived if res.adapter == "fake-hang"]
    assert TIMEOUT_S - 1.0 <= ended - started.stat().st_mtime <= TIMEOUT_S + 3.0


def test_the_adapter_after_a_hang_runs_in_a_fresh_worker(hang: Run) -> None:
    assert [r.adapter for r in hang.results] == ["fake-hang", "fake-where"]
    assert (hang["fake-where"].status, hang["fake-where"].reason) == (
        "skip",
        "where: CUDA_VISIBLE_DEVICES=''",
    )
    workers = {pids[0] for name, pids in _recorded(hang.pid_dir).items() if "child" not in name}
    assert len(workers) == 2


@pytest.mark.parametrize(("run", "processes"), [("crashes", 2), ("hang", 3)])
def test_no_process_outlives_the_run(
    run: str, processes: int, request: pytest.FixtureRequest
) -> None:
    pid_dir = request.getfixturevalue(run).pid_dir
    pids = {p for pids in _recorded(pid_dir).values() for p in pids}
    assert len(pids) == processes  # the workers, and the hang's own child
    assert _still_alive(pids) == []


# --- the protocol ----------------------------------------------------------------------------


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
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(smoke_runner, "STARTUP_TIMEOUT_S", 1.5)
    pid_file = tmp_path / "stuck.pid"
    body = (
        f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\ntime.sleep(600)\n"
    )
    t0 = time.monotonic()
    results = run_smoke(["emulation", "fake-wrong"], [], env=_sitecustomize(tmp_path, body))
    assert time.monotonic() - t0 < 10
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


def test_a_failing_callback_stops_the_run_and_is_re_raised(tmp_path: Path) -> None:
    class Boom(Exception):
        pass

    def on_result(result: SmokeResult) -> None:
        raise Boom(result.adapter)

    t0 = time.monotonic()
    with pytest.raises(Boom, match="emulation"):
        run_smoke(
            ["emulation", "fake-hang"],
            [],
            timeout_s=60,
            env=fake_env(tmp_path),
            on_result=on_result,
        )
    assert time.monotonic() - t0 < 30  # did not wait for the hang's timeout
    pids = {p for pids in _recorded(tmp_path).values() for p in pids}
    assert _still_alive(pids) == []
