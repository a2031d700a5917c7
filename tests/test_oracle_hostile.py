"""The engine oracle held to its budget against hostile engine interpreters: each
FP4DOCTOR_ENGINE_PYTHON below is a FAKE interpreter (a shell script standing for an engine
install gone wrong: a fault, not an engine). It floods its answer pipe or its stderr, leaves a
child holding the pipe, sleeps forever, or answers outside the adapters' vocabulary; each must
end in one "could not ask" reason, with its process group gone, and a SIGTERM to fp4doctor must
take the worker's children with it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from fp4doctor.oracle import query
from fp4doctor.oracle.answers import Case, EngineAnswers
from tests.processes import alive, still_alive

ROOT = Path(__file__).resolve().parents[1]
HOSTS = ROOT / "tests" / "fixtures" / "hosts"
CASES = [Case("as set", "linear", (10, 0)), Case("as set", "moe", (10, 0))]

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="POSIX shells")


@pytest.fixture(autouse=True)
def _nothing_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FP4DOCTOR_CACHE_DIR", "")  # each question reaches its worker


def interpreter(tmp_path: Path, body: str) -> str:
    """A FAKE engine interpreter: a /bin/sh script that ignores its arguments."""
    script = tmp_path / "engine-python"
    script.write_text("#!/bin/sh\n" + body + "\n")
    script.chmod(0o755)
    return str(script)


def ask(python: str, timeout_s: float = 120.0, judged: str = "0.33.0") -> EngineAnswers:
    env = {**os.environ, query.ENGINE_PYTHON_ENV: python, "FP4DOCTOR_CACHE_DIR": ""}
    asking = query.Asking("vllm", "vLLM", judged, CASES, stub=True, package="vllm", env=env,
                          timeout_s=timeout_s)  # fmt: skip
    return asking.answers()


def python_loop(statement: str) -> str:
    return f"exec {sys.executable} -c 'import sys\nwhile True: {statement}'"


def test_a_worker_that_floods_its_answer_pipe_is_stopped_at_the_byte_cap(tmp_path: Path) -> None:
    # Once: still running at 702 s with 118 MB buffered.
    got = ask(interpreter(tmp_path, python_loop('sys.stdout.write("x" * 65535 + "\\n")')))
    assert got.unasked is not None and "over 1 MiB on its answer pipe" in got.unasked


def test_a_worker_that_floods_one_endless_line_is_stopped_at_the_byte_cap(tmp_path: Path) -> None:
    got = ask(interpreter(tmp_path, python_loop('sys.stdout.write("x" * 65536)')))
    assert got.unasked is not None and "over 1 MiB on its answer pipe" in got.unasked


def test_a_worker_that_floods_stderr_is_stopped_at_its_cap(tmp_path: Path) -> None:
    # Once: a temporary file of 2.97 GB in 15 s.
    got = ask(interpreter(tmp_path, python_loop('sys.stderr.write("w" * 65535 + "\\n")')))
    assert got.unasked is not None and "over 16 MiB to stderr" in got.unasked


def test_a_child_holding_the_pipe_does_not_hold_the_answer(tmp_path: Path) -> None:
    # The worker exits; a child it started keeps the pipe open. Once: the full 600 s.
    pid_file = tmp_path / "child.pid"
    python = interpreter(tmp_path, f"sleep 100000 &\necho $! > {pid_file}\nexit 3")
    got = ask(python, timeout_s=600.0)
    assert got.unasked is not None and "its worker ended (exit 3) before answering" in got.unasked
    assert still_alive([int(pid_file.read_text())]) == []  # its group was killed


def test_a_worker_that_sleeps_forever_is_killed_at_the_deadline(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    python = interpreter(tmp_path, f"sleep 100000 &\necho $! > {pid_file}\nexec sleep 100000")
    got = ask(python, timeout_s=1.0)
    assert got.unasked is not None and "no answer within 1 s" in got.unasked
    assert still_alive([int(pid_file.read_text())]) == []


def speaking(tmp_path: Path, *messages: dict[str, object]) -> str:
    """A FAKE worker that speaks the protocol: reads its job, says `messages` and done."""
    lines = "".join(f"echo '{json.dumps(m)}'\n" for m in messages)
    return interpreter(tmp_path, f"read job\n{lines}echo '{json.dumps({'event': 'done'})}'")


def test_an_answer_whose_backend_is_not_its_kernel_is_refused(tmp_path: Path) -> None:
    hello = {"event": "hello", "engine": "vllm", "version": "0.33.0", "adapter": "vllm_0_24"}
    lying = {"event": "answer", "key": CASES[0].key, "engine_name": "MarlinNvFp4LinearKernel",
             "backend": "flashinfer-cudnn"}  # fmt: skip
    got = ask(speaking(tmp_path, hello, lying))
    assert got.unasked is not None and "kernel MarlinNvFp4LinearKernel is marlin" in got.unasked
    assert got.answers == {}
    honest = {**lying, "backend": "marlin"}
    got = ask(speaking(tmp_path, hello, honest))
    assert got.unasked is None and got.answers[CASES[0].key].backend == "marlin"


def test_an_answer_from_an_adapter_that_does_not_ask_that_release_is_refused(
    tmp_path: Path,
) -> None:
    hello = {"event": "hello", "engine": "vllm", "version": "0.33.0", "adapter": "vllm_0_18"}
    answer = {"event": "answer", "key": CASES[0].key, "engine_name": "MARLIN", "backend": None}
    got = ask(speaking(tmp_path, hello, answer))
    assert got.unasked is not None and "names adapter vllm_0_18 for 0.33.0" in got.unasked
    nobody = {**hello, "adapter": "os"}
    got = ask(speaking(tmp_path, nobody, answer))
    assert got.unasked is not None and "names adapter os" in got.unasked


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_sigterm_or_ctrl_c_takes_the_workers_children_along(tmp_path: Path, signum: int) -> None:
    pytest.importorskip("click")
    pid_file = tmp_path / "child.pid"
    python = interpreter(tmp_path, f"sleep 100000 &\necho $! > {pid_file}\nexec sleep 100000")
    env = {**os.environ, query.ENGINE_PYTHON_ENV: python, "FP4DOCTOR_CACHE_DIR": "",
           "PYTHONPATH": str(ROOT)}  # fmt: skip
    doctor = subprocess.Popen(
        [sys.executable, "-m", "fp4doctor", "check", "--facts", str(HOSTS / "b200-vllm-0.33.json")],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        # The worker's child is up when it has written its pid (bounded by pytest's timeout).
        while not (pid_file.exists() and pid_file.read_text().strip()):
            assert doctor.poll() is None, doctor.stderr.read() if doctor.stderr else ""
            still_alive([doctor.pid], within_s=0.05)
        child = int(pid_file.read_text())
        assert alive(child)
        doctor.send_signal(signum)
        doctor.wait(timeout=60)
    finally:
        doctor.kill()
        doctor.wait()
    assert doctor.returncode == (143 if signum == signal.SIGTERM else 130)
    assert still_alive([child]) == []
