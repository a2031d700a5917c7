"""fp4doctor/startup.py: NVML started beside the imports, for the commands that probe this host,
and never a change in what the probe sees; the garbage collector held off for fp4doctor's own
command line only."""

from __future__ import annotations

import ctypes
import gc
import json
import os
import subprocess
import sys
from typing import Any

import pytest

from fp4doctor import startup
from fp4doctor.probe.gpus import probe_gpus

SCRIPT = "/venv/bin/fp4doctor"
MODULE = os.path.join("/src", "fp4doctor", "__main__.py")


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([SCRIPT, "check"], True),
        ([SCRIPT, "check", "--no-smoke", "--target", "vllm"], True),
        ([MODULE, "env", "--prefer", "cudnn"], True),
        ([SCRIPT, "probe", "--json"], True),
        ([SCRIPT, "config", "-o", "x.yaml"], True),
        ([SCRIPT, "explain"], True),
        ([SCRIPT, "advisories"], True),
        ([SCRIPT, "node"], True),
        ([SCRIPT, "check", "--facts", "host.json"], False),  # a snapshot: nothing probed
        ([SCRIPT, "check", "--facts=host.json"], False),
        ([SCRIPT, "check", "--help"], False),
        ([SCRIPT, "env", "-h"], False),
        ([SCRIPT, "--version"], False),
        ([SCRIPT], False),
        ([SCRIPT, "profiles", "list"], False),
        ([SCRIPT, "fleet", "status"], False),
        (["/venv/bin/pytest", "-k", "check"], False),  # the module imported by a test runner
        ([os.path.join("/venv", "lib", "pytest", "__main__.py"), "check"], False),
        ([], False),
    ],
)
def test_only_commands_that_probe_this_host_start_nvml_early(
    argv: list[str], expected: bool
) -> None:
    assert startup.probes_this_host(argv) is expected


def test_the_probing_commands_are_commands_of_the_command_line() -> None:
    """startup.py names them before click loads (it cannot ask click): they must not drift."""
    from fp4doctor.cli.app import COMMANDS

    assert startup.PROBING - set(COMMANDS) == set()


def test_nothing_starts_for_a_command_that_does_not_probe() -> None:
    assert startup.begin_nvml([SCRIPT, "profiles", "list"]) is None


class _FakeNvml:
    """FAKE libnvidia-ml (a driver this host may not have): records what is called."""

    def __init__(self, calls: list[str]) -> None:
        self.calls = calls

    def nvmlInit_v2(self) -> int:
        self.calls.append("nvmlInit_v2")
        return 0

    def nvmlDeviceGetCount_v2(self, count: Any) -> int:
        count._obj.value = 2  # two GPUs
        self.calls.append("nvmlDeviceGetCount_v2")
        return 0

    def nvmlDeviceGetHandleByIndex_v2(self, index: int, handle: Any) -> int:
        self.calls.append(f"nvmlDeviceGetHandleByIndex_v2({index})")
        return 0


def test_the_thread_starts_nvml_and_attaches_each_gpu_through_the_library_pynvml_loads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    opened: list[str] = []
    calls: list[str] = []

    def fake_cdll(name: str) -> Any:
        opened.append(name)
        return _FakeNvml(calls)

    monkeypatch.setattr(ctypes, "CDLL", fake_cdll)
    thread = startup.begin_nvml([SCRIPT, "check"])
    assert thread is not None
    thread.join(10)
    assert not thread.is_alive()
    assert opened == ["libnvidia-ml.so.1"]
    assert calls == [
        "nvmlInit_v2",
        "nvmlDeviceGetCount_v2",
        "nvmlDeviceGetHandleByIndex_v2(0)",
        "nvmlDeviceGetHandleByIndex_v2(1)",
    ]


def test_a_host_without_the_driver_is_left_to_the_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(startup, "NVML_LIBRARY", "libfp4doctor-no-such-library.so.1")
    startup._start_nvml()  # no exception: probe_gpus meets the missing driver and reports it


def test_the_probe_sees_the_same_gpus_after_the_early_start() -> None:
    """In a fresh interpreter (NVML started or not there), on any host: the same NVML state and
    GPUs with the early start as without it."""
    code = (
        "import sys, json\n"
        "from fp4doctor import startup\n"
        "from fp4doctor.probe.gpus import probe_gpus\n"
        "if sys.argv[1] == 'early':\n"
        "    startup.begin_nvml(['fp4doctor', 'check']).join(30)\n"
        "report = probe_gpus()\n"
        "print(json.dumps([report.nvml.status, [g.uuid for g in report.gpus]]))\n"
    )
    answers = [
        subprocess.run(
            [sys.executable, "-c", code, mode], capture_output=True, text=True, timeout=60
        )
        for mode in ("early", "plain")
    ]
    assert [a.returncode for a in answers] == [0, 0], [a.stderr for a in answers]
    assert answers[0].stdout == answers[1].stdout
    assert answers[0].stdout.strip() == _this_process_sees()


def _this_process_sees() -> str:
    report = probe_gpus()
    return json.dumps([report.nvml.status, [g.uuid for g in report.gpus]])


def test_the_command_line_holds_the_collector_and_freezes_what_is_left_before_it_exits() -> None:
    """In a fresh interpreter, as the console script: the collector is off once the command line
    has loaded, and the objects are frozen (skipped by the collection at exit) when it exits."""
    code = (
        "import gc, sys\n"
        "sys.argv = ['fp4doctor', 'profiles', 'list']\n"
        "from fp4doctor import cli\n"
        "loaded = gc.isenabled()\n"
        "try:\n"
        "    cli.main()\n"
        "except SystemExit as exc:\n"
        "    frozen = gc.get_freeze_count() > 0\n"
        "    sys.stderr.write(f'{loaded} {gc.isenabled()} {frozen} {exc.code}')\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert run.stderr.split()[-4:] == ["False", "False", "True", "0"], run.stderr


def test_fleet_keeps_the_collector() -> None:
    """`fleet --ray` waits on a cluster with Ray's client in the process: not held there."""
    try:
        assert startup.hold_gc([SCRIPT, "fleet", "--ray"]) is False
        assert gc.isenabled()
    finally:  # were it held, this test process would go on without its collector
        gc.enable()
        startup._held = False


def test_a_program_that_imports_fp4doctor_keeps_its_collector() -> None:
    """A test runner, a user's script or a CliRunner calling the command line in-process: the
    collector stays on and nothing is frozen."""
    from click.testing import CliRunner

    from fp4doctor.cli import main

    frozen = gc.get_freeze_count()
    assert startup.hold_gc(["/venv/bin/pytest", "check"]) is False
    assert CliRunner().invoke(main, ["profiles", "list"]).exit_code == 0
    assert gc.isenabled()
    assert gc.get_freeze_count() == frozen


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([SCRIPT, "profiles", "list"], True),
        ([MODULE, "--version"], True),
        ([SCRIPT], True),
        (["/venv/bin/pytest", "-k", "check"], False),
        (["-c"], False),
        ([], False),
    ],
)
def test_the_command_line_is_the_console_script_or_the_module(
    argv: list[str], expected: bool
) -> None:
    assert startup.is_the_command_line(argv) is expected
