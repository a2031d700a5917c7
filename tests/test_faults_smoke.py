"""Smoke faults that tests/test_smoke_faults.py does not cover: out-of-memory in a worker, and
Ctrl-C delivered to the whole `fp4doctor check` command while its live GEMM runs, SIGINT or
SIGTERM to the command alone, and an address-space limit too small for torch.

The out-of-memory cases are labelled fakes (tests/smoke_fakes.py, `OOM_FAKES`): CUDA's
exception with its words (no GPU here), a real allocation failure made safe by capping the
worker's address space, and the SIGKILL that the kernel's OOM killer sends. They run in the
smoke run shared with tests/test_smoke_faults.py (`fault_run` in tests/conftest.py: after the
wrong answers and the crashes, before `emulation`), since each worker costs `import torch`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from processes import alive as _alive
from processes import still_alive as _still_alive
from smoke_fakes import CRASHES, HAS_TORCH, NO_TORCH, OUT_OF_MEMORY, FakeRun, fake_env

from fp4doctor.smoke import SmokeResult
from fp4doctor.smoke.worker import EXTRA_ADAPTERS_ENV

WORKER_MODULE = "fp4doctor.smoke.worker"
TOKEN_ENV = "FP4DOCTOR_TEST_TOKEN"


def _recorded(pid_dir: Path, prefix: str = "") -> list[int]:
    """Every pid the fakes wrote to `pid_dir` (files `name.pid`)."""
    return [
        int(x)
        for p in sorted(pid_dir.iterdir())
        if p.name.startswith(prefix)
        for x in p.read_text().split()
    ]


def _ppid(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])


def _descends_from(pid: int, ancestor: int) -> bool:
    seen = 0
    while pid > 1 and seen < 64:
        if pid == ancestor:
            return True
        parent = _ppid(pid)
        if parent is None:
            return False
        pid, seen = parent, seen + 1
    return False


def _workers(token: str, command: int) -> dict[int, str]:
    """Live processes that run the smoke worker and either descend from the `command` this test
    started (the `ppid` chain) or carry this test's token in their environment (an orphan whose
    parent died is re-parented, so its chain no longer leads here). Other tests' workers (a
    fixture's, started in the background by tests/conftest.py) are neither."""
    found: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue  # gone meanwhile, or not ours to read
        if WORKER_MODULE not in cmdline or not _alive(pid):
            continue
        if _descends_from(pid, command) or f"{TOKEN_ENV}={token}".encode() in environ.split(b"\0"):
            found[pid] = cmdline
    return found


# --- out of memory ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def oom(fault_run: FakeRun) -> tuple[list[SmokeResult], FakeRun]:
    return fault_run.results, fault_run


def _result(results: list[SmokeResult], adapter: str) -> SmokeResult:
    (r,) = [r for r in results if r.adapter == adapter]
    return r


def test_cuda_out_of_memory_is_an_error_in_the_allocators_words(
    oom: tuple[list[SmokeResult], FakeRun],
) -> None:
    """fake: CUDA's OutOfMemoryError and message, raised on a host without a GPU."""
    r = _result(oom[0], "fake-oom-cuda")
    assert r.status == "error"  # no verdict on the kernel, not a `fail` of it
    assert r.reason.startswith("out of memory, no verdict on the kernel: ")
    assert "OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB" in r.reason
    assert r.shapes == [[128, 256, 512]]


def test_a_real_allocation_failure_is_an_error_naming_the_size(
    oom: tuple[list[SmokeResult], FakeRun],
) -> None:
    """Real: the worker's address space is capped (RLIMIT_AS) and a 1 GiB tensor is asked for."""
    r = _result(oom[0], "fake-oom-rlimit")
    assert r.status == "error"
    assert r.reason.startswith("out of memory, no verdict on the kernel: ")
    assert "can't allocate memory: you tried to allocate 1073741824 bytes" in r.reason


def test_a_worker_killed_like_the_oom_killer_does_is_an_error_naming_sigkill(
    oom: tuple[list[SmokeResult], FakeRun],
) -> None:
    """fake: the worker sends itself SIGKILL, the OOM killer's signal (no memory exhausted)."""
    r = _result(oom[0], "fake-oom-killed")
    assert (r.status, r.reason) == ("error", "crashed: worker killed by SIGKILL (signal 9)")


def test_after_the_out_of_memory_cases_the_rest_still_runs_and_nothing_is_left(
    oom: tuple[list[SmokeResult], FakeRun],
) -> None:
    results, run = oom
    names = [r.adapter for r in results]
    first = names.index(OUT_OF_MEMORY[0])
    assert names[first:] == [*OUT_OF_MEMORY, "emulation", "fake-collector"]
    assert _result(results, "emulation").status == "pass"
    # The two raised OOMs share one worker (fresh after the crash before them); the SIGKILL
    # cost it, and a fresh worker ran emulation (which the fakes do not record).
    workers = {run.worker_of(name) for name in OUT_OF_MEMORY}
    assert len(workers) == 1
    assert workers.isdisjoint(run.worker_of(name) for name in CRASHES)
    assert _still_alive(workers) == []


# --- Ctrl-C on the whole command --------------------------------------------------------------


# How a command is stopped: (send to its group?, signal, exit code, the line on stderr).
STOPS = {
    "ctrl-c": (True, signal.SIGINT, 130, "fp4doctor: interrupted"),  # what a terminal does
    # To the command alone, not its group (`kill PID`; SIGTERM is what systemd, Kubernetes and
    # `timeout` send first): the workers are in process groups of their own, out of reach.
    "sigint-to-the-command": (False, signal.SIGINT, 130, "fp4doctor: interrupted"),
    "sigterm-to-the-command": (False, signal.SIGTERM, 143, "fp4doctor: terminated"),
}


@pytest.mark.skipif(not HAS_TORCH, reason=NO_TORCH)
@pytest.mark.parametrize("stop", list(STOPS))
def test_a_stopped_fp4doctor_check_exits_in_one_line_and_leaves_no_worker(
    tmp_path: Path, stop: str
) -> None:
    """fake: on a CPU host `check --smoke` runs only `emulation`, a labelled hanging stand-in
    (smoke_fakes.HANGING_EMULATION), so there is a live run to stop. The doctor kills its
    workers and exits 128 + the signal, in one line (SIGTERM once ended the doctor alone)."""
    to_group, sig, code, line = STOPS[stop]
    token = uuid.uuid4().hex
    env = fake_env(tmp_path)
    env[EXTRA_ADAPTERS_ENV] = "smoke_fakes:HANGING_EMULATION"
    env[TOKEN_ENV] = token
    proc = subprocess.Popen(
        [sys.executable, "-m", "fp4doctor", "check", "--target", "vllm", "--json", "--smoke"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a terminal gives a command
    )
    try:
        deadline = time.monotonic() + 60
        while not _recorded(tmp_path, "fake-hang-child.") and time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.05)
        (worker,) = _recorded(tmp_path, "emulation.")  # the worker is inside the adapter
        running = _workers(token, proc.pid)
        assert list(running) == [worker]  # the scan below sees a worker while there is one
        (os.killpg if to_group else os.kill)(proc.pid, sig)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == code, err
    assert out == ""  # no half report on stdout
    assert "Traceback" not in err and "Aborted!" not in err
    assert err.splitlines()[-1] == line
    assert _still_alive(_recorded(tmp_path)) == []  # the worker and the hang's own child
    assert _workers(token, proc.pid) == {}
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    assert f"| {code} |" in readme  # the exit code is documented


# --- an address-space limit (ulimit -v) ------------------------------------------------------

UNDER_A_LIMIT = """
import os, resource, sys
limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))  # what `ulimit -v` sets
os.execv(sys.executable, [sys.executable, "-m", "fp4doctor", *sys.argv[2:]])
"""


@pytest.mark.skipif(not HAS_TORCH, reason=NO_TORCH)
@pytest.mark.parametrize("mib", [512, 640])
def test_an_address_space_too_small_for_torch_is_a_finding(tmp_path: Path, mib: int) -> None:
    """Real: `check --smoke` under an address-space limit the doctor fits in and torch does not
    (on the 2-core CPU host, 512 MiB fails in numpy's C extension with its 25-line advice and
    640 MiB with a bare MemoryError; a GPU host's torch fails sooner). The limit is the
    doctor's and its worker's, as `ulimit -v` makes it: the report is written, the live GEMM
    is an `error` finding with a one-line reason that says something, never a traceback."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "FP4DOCTOR_CACHE_DIR": ""}
    done = subprocess.run(
        [sys.executable, "-c", UNDER_A_LIMIT, str(mib << 20),
         "check", "--target", "vllm", "--json", "--smoke"],
        capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr  # not ready (no GPU visible), not a crash
    assert "Traceback" not in done.stderr
    findings = {f["id"]: f for f in json.loads(done.stdout)["findings"]}
    live = findings["smoke.emulation.cpu"]
    assert live["status"] in ("error", "pass"), live  # pass: this torch fitted after all
    reason = live["reason"]
    assert "\n" not in reason and not reason.endswith(": ") and reason.strip() == reason, reason


def test_ctrl_c_exit_code_is_documented_apart_from_not_ready() -> None:
    from fp4doctor import console as cli

    assert cli.EXIT_INTERRUPTED == 128 + signal.SIGINT
    assert cli.EXIT_INTERRUPTED not in (
        cli.EXIT_READY,
        cli.EXIT_NOT_READY,
        cli.EXIT_USAGE,
        cli.EXIT_NO_VERDICT,
    )


def test_ctrl_c_reaches_every_command_the_same_way(monkeypatch: pytest.MonkeyPatch) -> None:
    """In-process: a KeyboardInterrupt from anywhere under a command is exit 130, one line."""
    from click.testing import CliRunner

    from fp4doctor import cli, doctor

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(doctor, "_host_and_profile", interrupted)
    for args in (["check", "--no-smoke"], ["env"], ["config", "-o", "-"]):
        result = CliRunner().invoke(cli.main, args)
        assert result.exit_code == 130, (args, result.output)
        assert (result.stdout, result.stderr) == ("", "fp4doctor: interrupted\n"), args
