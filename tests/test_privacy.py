"""`fp4doctor probe --json` (redacted by default) names no one and no machine, whatever the
environment holds: no GPU UUID or serial, no hostname, no user name, no home path, no secret.

The environment is made hostile on purpose: HOME is a directory named like a user, a PATH entry
inside it holds a fake nvcc (so a home path reaches the toolchain facts), LD_LIBRARY_PATH
points inside it, CUDA_VISIBLE_DEVICES and NVIDIA_VISIBLE_DEVICES carry GPU UUIDs, cache paths
carry the hostname and the user name, and secret-looking variables hold values. The secrets'
values are made unique (`secret123`, `tok-…`, `pw-…`, `x-…`) so that finding one in the output
means it leaked, not that "x" occurs in "x86_64".
"""

from __future__ import annotations

import getpass
import json
import os
import re
import socket
import subprocess
import sys
import types
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from fp4doctor import facts
from fp4doctor.probe import probe_host

GPU_UUID = "GPU-3f1e2d4c-5b6a-4980-a1b2-c3d4e5f60718"
OTHER_GPU_UUID = "GPU-9a8b7c6d-5e4f-4321-8765-43210fedcba9"
SERIAL = "1654923011337"
PCI_BUS_ID = "00000000:1B:00.0"


def token(name: str) -> re.Pattern[str]:
    """`name` as a whole word: a two-letter hostname such as "vm" must not hit "nvml"."""
    return re.compile(rf"(?<![\w.-]){re.escape(name)}(?![\w-])")


@dataclass(frozen=True)
class Hostile:
    """An environment full of things that must not reach a redacted snapshot."""

    env: dict[str, str]
    home: Path
    user_like: str  # the home directory's name
    secrets: dict[str, str]

    def forbidden(self) -> dict[str, re.Pattern[str]]:
        """What must not appear, each as a pattern over the output."""
        found = {f"secret {k}": re.compile(re.escape(v)) for k, v in self.secrets.items()}
        found.update(
            {
                "home": re.compile(re.escape(str(self.home))),
                "home's name": token(self.user_like),
                "hostname": token(socket.gethostname()),
                "user name": token(getpass.getuser()),
                "GPU UUID": re.compile(re.escape(GPU_UUID[4:12]), re.I),
                "other GPU UUID": re.compile(re.escape(OTHER_GPU_UUID[4:12]), re.I),
                "serial": re.compile(re.escape(SERIAL)),
                "PCI bus id": re.compile(re.escape(PCI_BUS_ID), re.I),
            }
        )
        return found


def leaks(text: str, hostile: Hostile) -> dict[str, list[str]]:
    """Each forbidden thing found in `text`, with where (a little context)."""
    out: dict[str, list[str]] = {}
    for what, pattern in hostile.forbidden().items():
        hits = [text[max(0, m.start() - 30) : m.end() + 30] for m in pattern.finditer(text)]
        if hits:
            out[what] = hits
    return out


@pytest.fixture
def hostile(tmp_path: Path) -> Hostile:
    user_like = f"jdoe{uuid.uuid4().hex[:6]}"
    home = tmp_path / "home" / user_like
    nvcc = home / "bin" / "nvcc"
    nvcc.parent.mkdir(parents=True)
    nvcc.write_text(
        "#!/bin/sh\n"
        "echo 'nvcc: NVIDIA (R) Cuda compiler driver'\n"
        "echo 'Cuda compilation tools, release 12.8, V12.8.93'\n"
    )
    nvcc.chmod(0o755)
    (home / "lib").mkdir()
    rand = uuid.uuid4().hex[:8]
    secrets = {
        "VLLM_API_KEY": "secret123",
        "HF_TOKEN": f"tok-{rand}",
        "FLASHINFER_PASSWORD": f"pw-{rand}",
        "FP4DOCTOR_SECRET": f"x-{rand}",
        "SGLANG_AUTH_HEADER": f"Bearer sk-{rand}",
    }
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_HOME", "CUDA_PATH")}
    env.update(secrets)
    env.update(
        {
            "HOME": str(home),
            "PATH": f"{home / 'bin'}{os.pathsep}{env.get('PATH', os.defpath)}",
            "LD_LIBRARY_PATH": f"{home / 'lib'}{os.pathsep}{home}/.local/cudnn/lib",
            "CUDA_VISIBLE_DEVICES": GPU_UUID,
            "NVIDIA_VISIBLE_DEVICES": f"{GPU_UUID},{OTHER_GPU_UUID}",
            "VLLM_CACHE_ROOT": f"/scratch/{socket.gethostname()}/vllm",
            "FLASHINFER_WORKSPACE_BASE": f"/scratch/{getpass.getuser()}/flashinfer",
        }
    )
    return Hostile(env, home, user_like, secrets)


def probe_cli(hostile: Hostile, *flags: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "fp4doctor", "probe", "--json", *flags],
        capture_output=True,
        text=True,
        env=hostile.env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_probe_json_carries_nothing_that_identifies(hostile: Hostile) -> None:
    out = probe_cli(hostile)
    assert leaks(out, hostile) == {}
    data = json.loads(out)
    assert data["hostname"] is None
    # The hostile values did reach the probe, and came out scrubbed.
    assert data["toolchain"]["nvcc_path"] == "~/bin/nvcc"
    assert data["env"]["LD_LIBRARY_PATH"] == "~/lib:~/.local/cudnn/lib"
    assert data["cuda_visible_devices"] == "GPU-<redacted>"
    assert data["env"]["NVIDIA_VISIBLE_DEVICES"] == "GPU-<redacted>,GPU-<redacted>"
    assert data["env"]["VLLM_CACHE_ROOT"] == "/scratch/<redacted>/vllm"
    assert data["env"]["FLASHINFER_WORKSPACE_BASE"] == "/scratch/<redacted>/flashinfer"
    for name in hostile.secrets:
        assert data["env"].get(name, facts.REDACTED) == facts.REDACTED, name


def test_the_same_probe_unredacted_shows_what_was_removed(hostile: Hostile) -> None:
    """`--no-redact` keeps them: the test above is not passing for want of anything to find."""
    out = probe_cli(hostile, "--no-redact")
    found = leaks(out, hostile)
    assert {"home", "hostname", "user name", "GPU UUID", "other GPU UUID"} <= set(found)
    assert not any(k.startswith("secret") for k in found)  # secrets never enter the facts


# --- GPUs with identities, in-process -----------------------------------------------------------


def identified_pynvml() -> types.ModuleType:
    """fake: one B200 with a UUID, a serial, a PCI bus id and a board id (no GPU on this host).
    It answers every identity call NVML has, whether or not the probe asks today."""
    module = types.ModuleType("pynvml")

    class NVMLError(Exception):
        value = 999

    gpu = object()
    functions: dict[str, Callable[..., Any]] = {
        "nvmlInit": lambda: None,
        "nvmlShutdown": lambda: None,
        "nvmlSystemGetDriverVersion": lambda: "580.95.05",
        "nvmlSystemGetCudaDriverVersion_v2": lambda: 13000,
        "nvmlDeviceGetCount": lambda: 1,
        "nvmlDeviceGetHandleByIndex": lambda i: gpu,
        "nvmlDeviceGetUUID": lambda h: GPU_UUID,
        "nvmlDeviceGetSerial": lambda h: SERIAL,
        "nvmlDeviceGetBoardId": lambda h: 0x1B00,
        "nvmlDeviceGetPciInfo": lambda h: types.SimpleNamespace(busId=PCI_BUS_ID.encode()),
        "nvmlDeviceGetName": lambda h: "NVIDIA B200",
        "nvmlDeviceGetCudaComputeCapability": lambda h: (10, 0),
        "nvmlDeviceGetMemoryInfo": lambda h: types.SimpleNamespace(total=183359 << 20),
        "nvmlDeviceGetMigMode": lambda h: (0, 0),
    }
    for name, function in functions.items():
        setattr(module, name, function)
    module.NVMLError = NVMLError  # type: ignore[attr-defined]
    return module


def test_redacted_facts_of_a_gpu_with_uuid_and_serial(
    hostile: Hostile, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", identified_pynvml())
    monkeypatch.setenv("HOME", str(hostile.home))  # the home `redact` strips by default
    host = probe_host(hostile.env)
    assert [(g.name, g.uuid) for g in host.gpus] == [("NVIDIA B200", GPU_UUID)]
    assert "GPU UUID" in leaks(facts.dumps(host), hostile)  # there before redaction

    clean = facts.redact(host)
    text = facts.dumps(clean)
    assert leaks(text, hostile) == {}
    assert [(g.name, g.cc, g.uuid) for g in clean.gpus] == [("NVIDIA B200", 100, None)]
    assert facts.loads(text) == clean  # still a valid snapshot
