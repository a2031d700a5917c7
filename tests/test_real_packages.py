"""Real-packages tier: the probe agrees with what the installed libraries say about themselves.

The libraries are imported in a subprocess (the doctor itself never imports them), once for
the whole module (importing flashinfer and torch takes seconds), with torch 2.13.0,
flashinfer-python, nvidia-cudnn-frontend and nvidia-cudnn-cu12 installed.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

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


# What the libraries say about themselves, asked in one fresh interpreter; each answer is a
# JSON value, or {"error": ...} when asking raised (that test then fails with the error).
_ASK = """
import importlib, json

def ask(module, question):
    try:
        return question(importlib.import_module(module))
    except Exception as exc:  # an import that fails, too, fails only the tests that ask it
        return {"error": f"{type(exc).__name__}: {exc}"}

def torch_cudnn(torch):
    return torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None

said = {
    "cudnn.backend_version": ask("cudnn", lambda cudnn: cudnn.backend_version()),
    "cudnn.__version__": ask("cudnn", lambda cudnn: cudnn.__version__),
    "flashinfer.__version__": ask("flashinfer", lambda flashinfer: flashinfer.__version__),
    "torch": ask("torch", lambda torch: [
        torch.__version__, torch.version.cuda, torch.version.git_version, torch.version.hip
    ]),
    "torch.backends.cudnn": ask("torch", torch_cudnn),
}
print(json.dumps(said))
"""


def _ask_them(workdir: Path) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", _ASK], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    answers: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return answers


# Started in the background once collection ends (tests/conftest.py, `prefetched`).
PREFETCH = {"said": _ask_them} if not _missing else {}


@pytest.fixture(scope="module")
def said(prefetched: Callable[..., dict[str, object]]) -> dict[str, object]:
    return prefetched(__name__, "said", _ask_them)


def ask(said: dict[str, object], question: str) -> object:
    """One answer of `said`; a question that raised fails the test that asked it."""
    answer = said[question]
    assert not (isinstance(answer, dict) and "error" in answer), (question, answer)
    return answer


@pytest.fixture(scope="module")
def host() -> HostFacts:
    return probe_host()


def test_cudnn_backend_version_equals_the_frontends(
    host: HostFacts, said: dict[str, object]
) -> None:
    backend = ask(said, "cudnn.backend_version")
    assert host.cudnn.frontend.error is None
    assert host.cudnn.frontend.version == backend


def test_cudnn_frontend_version(host: HostFacts, said: dict[str, object]) -> None:
    answer = ask(said, "cudnn.__version__")
    probed = host.packages.version("nvidia-cudnn-frontend")
    assert probed is not None and isinstance(answer, str)
    assert Version(probed) == Version(answer)


def test_flashinfer_version(host: HostFacts, said: dict[str, object]) -> None:
    answer = ask(said, "flashinfer.__version__")
    probed = host.packages.version("flashinfer-python")
    assert probed is not None and isinstance(answer, str)
    assert Version(probed) == Version(answer)


def test_torch_version_and_cuda(host: HostFacts, said: dict[str, object]) -> None:
    answer = ask(said, "torch")
    assert isinstance(answer, list)
    version, cuda, git, hip = answer
    probed = host.packages.version("torch")
    assert probed is not None
    assert Version(probed) == Version(version)
    assert host.packages.torch_cuda == cuda  # None on a CPU build
    assert host.packages.torch_git_version == git
    assert host.packages.torch_hip == hip


def test_torch_cudnn_is_reported_only_when_it_is_another_file(
    host: HostFacts, said: dict[str, object]
) -> None:
    answer = ask(said, "torch.backends.cudnn")
    if answer is None:
        assert host.cudnn.torch is None
    elif host.cudnn.torch is not None:
        assert host.cudnn.torch.version == answer
    else:
        assert host.cudnn.frontend.version == answer
