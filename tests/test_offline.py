"""Offline: the whole `fp4doctor check`, live GEMM included, makes no connection attempt and
gives the same verdict without a network.

Two ways, both run against the same online baseline:
- connection attempts trapped: a `sitecustomize.py` first on PYTHONPATH (so the smoke workers,
  which inherit it, are covered too) wraps `socket.socket.connect`/`connect_ex`/`sendto`,
  `socket.getaddrinfo` and `socket.create_connection`; each attempt is written to a file and
  refused as an unreachable network would refuse it. Works without root.
- a network namespace with no interfaces (`ip netns`, loopback down): needs root and
  iproute2; skipped with the reason when `ip netns add` fails. There every connection attempt,
  a C library's too (out of the trap's sight), fails at once (no route: ENETUNREACH), so the
  same verdict there rules out a dependence on the network without timing anything (a
  wall-clock comparison once stood here; no test holds a wall-clock budget).

Every run hides the GPUs (`CUDA_VISIBLE_DEVICES=""`, see `cpu_env`): on a CPU host `check`
always runs its live GEMM (`emulation`, in a worker), while on a GPU host it may run none
(no backend eligible, e.g. on an H200) and the worker's side would go untested. The live
GEMMs on a GPU, and their libraries' downloads, are not this module's subject: `--allow-jit`
is off by default and tests/test_smoke_cpu.py checks that the workers' environment says so.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

CHECK = ("check", "--target", "vllm", "--json", "--smoke")
WORKER_MODULE = "fp4doctor.smoke.worker"

TRAP = '''\
"""TEST TRAP (tests/test_offline.py): record every network attempt of this process, refuse it."""
import errno, os, socket

_RECORD = {record!r}
_LOADED = {loaded!r}


def _cmdline():
    try:
        with open("/proc/self/cmdline", "rb") as f:
            return f.read().replace(b"\\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"


def _note(path, text):
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (" ".join(text.split()) + "\\n").encode(errors="replace"))
    finally:
        os.close(fd)


def _attempt(what, *args):
    _note(_RECORD, f"{{os.getpid()}} {{what}} {{args!r}} by {{_cmdline()}}")


_connect, _connect_ex = socket.socket.connect, socket.socket.connect_ex
_sendto = socket.socket.sendto


def connect(self, address):
    _attempt("connect", address)
    raise OSError(errno.ENETUNREACH, os.strerror(errno.ENETUNREACH))


def connect_ex(self, address):
    _attempt("connect_ex", address)
    return errno.ENETUNREACH


def sendto(self, *args):
    _attempt("sendto", args[-1])
    raise OSError(errno.ENETUNREACH, os.strerror(errno.ENETUNREACH))


def getaddrinfo(host, port, *args, **kwargs):
    _attempt("getaddrinfo", host, port)
    raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")


def create_connection(address, *args, **kwargs):
    _attempt("create_connection", address)
    raise OSError(errno.ENETUNREACH, os.strerror(errno.ENETUNREACH))


socket.socket.connect = connect
socket.socket.connect_ex = connect_ex
socket.socket.sendto = sendto
socket.getaddrinfo = getaddrinfo
socket.create_connection = create_connection
_note(_LOADED, f"{{os.getpid()}} {{_cmdline()}}")
'''


@dataclass(frozen=True)
class Trap:
    """A PYTHONPATH directory holding the trap, and the files it writes."""

    site: Path
    record: Path  # one line per attempt
    loaded: Path  # one line per process the trap was loaded in

    @classmethod
    def make(cls, where: Path) -> Trap:
        where.mkdir(parents=True, exist_ok=True)
        trap = cls(where / "site", where / "attempts.log", where / "loaded.log")
        trap.site.mkdir()
        text = TRAP.format(record=str(trap.record), loaded=str(trap.loaded))
        (trap.site / "sitecustomize.py").write_text(text)
        return trap

    def env(self) -> dict[str, str]:
        env = cpu_env()
        path = env.get("PYTHONPATH")
        env["PYTHONPATH"] = str(self.site) + (os.pathsep + path if path else "")
        return env

    def attempts(self) -> list[str]:
        return self.record.read_text().splitlines() if self.record.exists() else []

    def processes(self) -> list[str]:
        return self.loaded.read_text().splitlines() if self.loaded.exists() else []


def cpu_env() -> dict[str, str]:
    """This environment with every GPU hidden from CUDA, and so from `check` and its worker."""
    return {**os.environ, "CUDA_VISIBLE_DEVICES": ""}


@dataclass(frozen=True)
class Run:
    returncode: int
    report: dict[str, Any]
    stderr: str


def run_check(env: dict[str, str], prefix: Sequence[str] = ()) -> Run:
    done = subprocess.run(
        [*prefix, sys.executable, "-m", "fp4doctor", *CHECK],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert "Traceback" not in done.stderr, done.stderr
    return Run(done.returncode, json.loads(done.stdout), done.stderr)


def verdict(report: dict[str, Any]) -> dict[str, Any]:
    """What a run concluded, without what varies from run to run (timings, errors measured)."""
    return {
        "ready": report["ready"],
        "exit_code": report["exit_code"],
        "summary": report["summary"],
        "backends": report["families"]["linear"]["backends"],
        "engine_auto": report["families"]["linear"]["engine_auto"],
        "resolution": report["families"]["linear"]["resolution"],
        "findings": [
            (f["id"], f["status"], f["reason"] if not f["id"].startswith("smoke.") else None)
            for f in report["findings"]
        ],
    }


@pytest.fixture(scope="module")
def online() -> Run:
    """The baseline: `check` as it runs on this host, network and all."""
    if importlib.util.find_spec("torch") is None:
        pytest.skip("the live GEMM needs torch, which is not installed (fp4doctor[smoke])")
    return run_check(cpu_env())


def test_the_online_baseline_is_not_ready_with_the_live_gemm_run(online: Run) -> None:
    assert online.returncode == 1  # no GPU visible: not ready
    assert online.report["exit_code"] == 1
    smoke = [f for f in online.report["findings"] if f["id"].startswith("smoke.")]
    assert [(f["id"], f["status"]) for f in smoke] == [
        ("smoke.emulation.cpu", "pass"),
        ("smoke.emulation-moe.cpu", "pass"),  # the MoE family's own pipeline (tests/test_moe.py)
    ]


def test_the_trap_records_and_refuses_each_kind_of_attempt(tmp_path: Path) -> None:
    """The trap itself works, so an empty record below means something."""
    trap = Trap.make(tmp_path)
    code = (
        "import socket\n"
        "for attempt in (\n"
        "    lambda: socket.create_connection(('192.0.2.1', 443), timeout=1),\n"
        "    lambda: socket.getaddrinfo('pypi.org', 443),\n"
        "    lambda: socket.socket().connect(('192.0.2.1', 80)),\n"
        "    lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
        "    .sendto(b'x', ('192.0.2.1', 53)),\n"
        "):\n"
        "    try:\n"
        "        attempt()\n"
        "    except OSError:\n"
        "        pass\n"
        "    else:\n"
        "        raise SystemExit('not refused')\n"
        "assert socket.socket().connect_ex(('192.0.2.1', 80)) != 0\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=trap.env(), timeout=60
    )
    assert done.returncode == 0, done.stderr
    kinds = [line.split()[1] for line in trap.attempts()]
    assert kinds == ["create_connection", "getaddrinfo", "connect", "sendto", "connect_ex"]


def test_check_with_connections_trapped_attempts_none(tmp_path: Path, online: Run) -> None:
    """Same verdict, nothing attempted (the namespace test below refuses what the trap cannot
    see)."""
    trap = Trap.make(tmp_path)
    offline = run_check(trap.env())
    # The trap was in the doctor and in its smoke worker, and nothing was attempted.
    processes = trap.processes()
    assert any(WORKER_MODULE in p for p in processes), processes
    assert any(f"-m fp4doctor {' '.join(CHECK)}" in p for p in processes), processes
    assert trap.attempts() == []
    assert offline.returncode == 1
    assert verdict(offline.report) == verdict(online.report)


# --- a network namespace with no interfaces ---------------------------------------------------


@pytest.fixture
def empty_netns() -> Iterator[str]:
    """A fresh network namespace (only a loopback, and it is down), deleted afterwards."""
    ip = shutil.which("ip")
    if ip is None:
        pytest.skip("no `ip` command (iproute2 is not installed)")
    name = f"fp4doctor-test-{uuid.uuid4().hex[:12]}"
    made = subprocess.run([ip, "netns", "add", name], capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"`ip netns add` failed (needs root and iproute2): {made.stderr.strip()}")
    try:
        links = subprocess.run(
            [ip, "netns", "exec", name, ip, "-o", "link", "show", "up"],
            capture_output=True,
            text=True,
            check=True,
        )
        assert links.stdout.strip() == ""  # no interface is up, not even loopback
        yield name
    finally:
        subprocess.run([ip, "netns", "delete", name], capture_output=True, check=False)
        listed = subprocess.run([ip, "netns", "list"], capture_output=True, text=True)
        assert name not in listed.stdout, f"network namespace {name} was left behind"


def test_check_in_a_namespace_without_network_is_the_same(
    empty_netns: str, tmp_path: Path, online: Run
) -> None:
    trap = Trap.make(tmp_path)  # also here, to see any attempt the namespace would refuse
    prefix = ("ip", "netns", "exec", empty_netns)
    offline = run_check(trap.env(), prefix)
    assert trap.attempts() == []
    assert any(WORKER_MODULE in p for p in trap.processes())
    assert offline.returncode == 1
    assert verdict(offline.report) == verdict(online.report)
