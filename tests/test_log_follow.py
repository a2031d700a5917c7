"""`verify-log --follow`: a log still being written. The start-up verdict is printed as soon as
the kernel lines are written (read before anything more is written, so it cannot wait for the
end), the first error with its diagnosis; the reader stops once the engine is up, has failed,
or at --timeout; a pipe ends with its writer."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from fp4doctor.logs.follow import Follow
from fp4doctor.logs.reading import Reading, read_text

ROOT = Path(__file__).resolve().parents[1]
H200 = ROOT / "tests" / "fixtures" / "hosts" / "h200.json"
KERNELS = (
    "(EngineCore pid=1) INFO 01-05 10:00:00 [a.py:1] Using MarlinNvFp4LinearKernel for NVFP4 "
    "GEMM\n(EngineCore pid=1) INFO 01-05 10:00:00 [a.py:1] Using 'MARLIN' NvFp4 MoE backend out "
    "of potential backends: ['MARLIN'].\n"
)


def _start(log: str, *args: str, stdin: int | None = None) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FP4DOCTOR_CACHE_DIR": ""}
    return subprocess.Popen(
        [sys.executable, "-m", "fp4doctor", "verify-log", "--follow", log, "--no-engine",
         "--facts", str(H200), "--engine-version", "0.33.0", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=stdin, text=True, env=env,
    )  # fmt: skip


def _append(path: Path, text: str) -> None:
    with path.open("a") as f:
        f.write(text)


def test_the_verdict_comes_as_the_kernel_lines_appear_and_the_error_with_its_cause(
    tmp_path: Path,
) -> None:
    log = tmp_path / "server.log"
    log.write_text(
        "(APIServer pid=1) INFO 01-05 10:00:00 [a.py:1] vLLM API server version 0.33.0\n"
    )
    proc = _start(str(log), "--timeout", "300")
    try:
        _append(log, KERNELS)
        assert proc.stdout is not None
        first = proc.stdout.readline()  # printed before anything more is written
        assert first.startswith("✓ log.linear: log line 2: vllm ran marlin"), first
        assert proc.stdout.readline().startswith("✓ log.moe:")
        _append(
            log,
            "(EngineCore pid=1) ERROR 01-05 10:00:05 [core.py:1] Traceback (most recent call "
            'last):\n(EngineCore pid=1) ERROR 01-05 10:00:05 [core.py:1]   File "/v/site-packages/'
            'vllm/model_executor/layers/fused_moe/fused_marlin_moe.py", line 9, in apply\n'
            "(EngineCore pid=1) ERROR 01-05 10:00:05 [core.py:1] RuntimeError: CUDA error: no "
            "kernel image is available for execution on the device\n",
        )
        out, err = proc.communicate(timeout=300)
    finally:
        proc.kill()
    assert proc.returncode == 1, err
    assert "log.error.no_kernel_image: log line 6" in out
    assert "at vllm/model_executor/layers/fused_moe/fused_marlin_moe.py:9 in apply" in out
    assert out.count("log.linear") == 0  # not printed twice
    assert "start-up verdict at log line 3" in err


def test_it_stops_once_the_server_is_up(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(KERNELS)
    proc = _start(str(log), "--timeout", "300")
    try:
        _append(log, "(APIServer pid=1) INFO:     Application startup complete.\n")
        out, err = proc.communicate(timeout=300)
    finally:
        proc.kill()
    assert proc.returncode == 0, out + err


def test_the_timeout_ends_a_log_that_never_says_anything(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("(APIServer pid=1) INFO 01-05 10:00:00 [a.py:1] Loading weights\n")
    proc = _start(str(log), "--timeout", "0.5")
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 3
    assert "the time limit passed" in err


def test_a_pipe_ends_with_its_writer() -> None:
    proc = _start("-", "--timeout", "300", stdin=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(KERNELS)
        proc.stdin.flush()
        assert proc.stdout.readline().startswith("✓ log.linear")
        proc.stdin.close()
        proc.stdout.read()
        proc.wait(timeout=300)
    finally:
        proc.kill()
    assert proc.returncode == 0


def test_the_stop_policy() -> None:
    now = [0.0]
    reading = Reading()
    follow = Follow(reading, timeout=10, clock=lambda: now[0])
    assert follow()  # nothing yet: keep waiting
    now[0] = 11
    assert not follow() and reading.tally.timed_out
    up = read_text("INFO:     Application startup complete.\n")
    assert not Follow(up, timeout=10)()
    failed = read_text("RuntimeError: CUDA error: x\n")
    assert not Follow(failed, timeout=10)()


def test_timeout_without_follow_is_a_usage_error(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_text(KERNELS)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "fp4doctor", "verify-log", str(log), "--timeout", "5"],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 2 and "--timeout is for --follow" in done.stderr
