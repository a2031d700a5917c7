"""The whole probe: one HostFacts, every part guarded, and never an import of torch & co."""

from __future__ import annotations

import ast
import json
import os
import platform
import re
import subprocess
import sys
from pathlib import Path

import pytest

import fp4doctor
import fp4doctor.probe as probe
from fp4doctor import facts
from fp4doctor.probe import probe_host

PROBE_DIR = Path(probe.__file__).parent
FORBIDDEN = {"torch", "flashinfer", "cudnn"}


def test_real_host_probe_round_trips() -> None:
    host = probe_host()
    assert host.schema_version == facts.SCHEMA_VERSION
    assert host.fp4doctor_version == fp4doctor.__version__
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", host.captured_at or "")
    assert host.python_version == platform.python_version()
    assert host.hostname == os.uname().nodename
    assert platform.machine() in (host.platform or "")
    assert host.synthetic is None
    assert facts.loads(facts.dumps(host)) == host
    for part in ("packages", "gpus", "cudnn", "toolchain", "environment"):
        assert part not in host.probe_errors


def test_environ_is_honoured() -> None:
    host = probe_host({"CUDA_VISIBLE_DEVICES": "", "VLLM_API_KEY": "sk-1", "PATH": os.defpath})
    assert host.cuda_visible_devices == ""
    assert host.env == {"CUDA_VISIBLE_DEVICES": "", "VLLM_API_KEY": facts.REDACTED}
    assert host.gpus == []


def test_a_failing_probe_becomes_a_recorded_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise OSError("disk on fire")

    monkeypatch.setattr(probe, "probe_packages", broken)
    monkeypatch.setattr(probe, "probe_toolchain", broken)
    host = probe_host()
    assert host.probe_errors["packages"] == "OSError: disk on fire"
    assert host.probe_errors["toolchain"] == "OSError: disk on fire"
    assert host.packages == facts.PackageFacts()
    assert host.nvml.status  # the other parts still ran


def test_probe_never_imports_torch_flashinfer_or_cudnn() -> None:
    code = (
        "import sys, fp4doctor.probe as p; p.probe_host(); "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'flashinfer', 'cudnn'}))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_probe_sources_do_not_import_them() -> None:
    for source in PROBE_DIR.glob("*.py"):
        tree = ast.parse(source.read_text(), str(source))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "import_module":
                names = [
                    a.value
                    for a in node.args
                    if isinstance(a, ast.Constant) and isinstance(a.value, str)
                ]
            for name in names:
                assert name.split(".")[0] not in FORBIDDEN, f"{source.name} imports {name}"


def test_cli_probe_json_is_redacted_facts() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "fp4doctor", "probe", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    host = facts.loads(done.stdout, "probe --json")
    assert host.hostname is None
    assert all(gpu.uuid is None for gpu in host.gpus)
    assert json.loads(done.stdout)["schema_version"] == facts.SCHEMA_VERSION
