"""Real-packages tier: the probe agrees with what the installed libraries say about themselves.

Each library is imported in its own subprocess (the doctor itself never imports them), with
torch 2.13.0, flashinfer-python, nvidia-cudnn-frontend and nvidia-cudnn-cu12 installed.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest
from packaging.version import Version

from fp4doctor.facts import HostFacts
from fp4doctor.probe import probe_host

REQUIRED = ("torch", "flashinfer", "cudnn")
_missing = [name for name in REQUIRED if importlib.util.find_spec(name) is None]

pytestmark = [
    pytest.mark.real_packages,
    pytest.mark.skipif(
        bool(_missing),
        reason=f"real-packages tier: {', '.join(_missing)} not installed "
        "(pip install torch flashinfer-python nvidia-cudnn-frontend nvidia-cudnn-cu12)",
    ),
]


def ask(code: str) -> object:
    """Run `code` in a fresh interpreter; it must print one JSON value as its last line."""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def host() -> HostFacts:
    return probe_host()


def test_cudnn_backend_version_equals_the_frontends(host: HostFacts) -> None:
    backend = ask("import json, cudnn; print(json.dumps(cudnn.backend_version()))")
    assert host.cudnn.frontend.error is None
    assert host.cudnn.frontend.version == backend


def test_cudnn_frontend_version(host: HostFacts) -> None:
    said = ask("import json, cudnn; print(json.dumps(cudnn.__version__))")
    probed = host.packages.version("nvidia-cudnn-frontend")
    assert probed is not None and isinstance(said, str)
    assert Version(probed) == Version(said)


def test_flashinfer_version(host: HostFacts) -> None:
    said = ask("import json, flashinfer; print(json.dumps(flashinfer.__version__))")
    probed = host.packages.version("flashinfer-python")
    assert probed is not None and isinstance(said, str)
    assert Version(probed) == Version(said)


def test_torch_version_and_cuda(host: HostFacts) -> None:
    said = ask(
        "import json, torch; "
        "print(json.dumps([torch.__version__, torch.version.cuda, torch.version.git_version, "
        "torch.version.hip]))"
    )
    assert isinstance(said, list)
    version, cuda, git, hip = said
    probed = host.packages.version("torch")
    assert probed is not None
    assert Version(probed) == Version(version)
    assert host.packages.torch_cuda == cuda  # None on a CPU build
    assert host.packages.torch_git_version == git
    assert host.packages.torch_hip == hip


def test_torch_cudnn_is_reported_only_when_it_is_another_file(host: HostFacts) -> None:
    said = ask(
        "import json, torch; c = torch.backends.cudnn; "
        "print(json.dumps(c.version() if c.is_available() else None))"
    )
    if said is None:
        assert host.cudnn.torch is None
    elif host.cudnn.torch is not None:
        assert host.cudnn.torch.version == said
    else:
        assert host.cudnn.frontend.version == said
