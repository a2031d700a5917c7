"""`fp4doctor prewarm`: build, on this host and before the engine starts, the FlashInfer JIT modules
its first start-up would build, so that the start finds them in the JIT workspace.

The plan comes from the report's cold start (what each family's chosen backend will build) and
the rules' `builder` per module (the JitSpec generator FlashInfer itself calls). Each module is
built in its own interpreter, `generator().build_and_load()`, as FlashInfer's first call would:
a failing build is that module's failure, not fp4doctor's. The autotune is not prewarmed: it runs
inside the engine's own warm-up for the model's shapes (`env --cold-start persist` keeps it).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from fp4doctor.coldstart import rules as _rules
from fp4doctor.facts import HostFacts

# Run in a fresh interpreter: import the generator's module, build and load the JitSpec. Never
# from the working directory: `python -c` puts it first on sys.path, and a `flashinfer/` there
# would run as the user (root in a container) and be reported as built. `-P` (3.11+) leaves it
# out; before 3.11 the script drops it before its first import (importlib and sys are loaded at
# start-up, not looked up). PYTHONPATH and site-packages stay, as the engine would see them.
_SAFE_PATH = ["-P"] if sys.version_info >= (3, 11) else []
_BUILD = (
    "import sys\n"
    "if sys.path[:1] == ['']: del sys.path[0]\n"
    "import importlib\n"
    "module, function = sys.argv[1].split(':')\n"
    "getattr(importlib.import_module(module), function)().build_and_load()\n"
)


@dataclass(frozen=True)
class Step:
    """One module to build, with the family and backend that need it."""

    family: str
    backend: str
    module: str
    builder: str | None  # None: no generator is known for it (a plan that cannot run)


def plan(host: HostFacts, family: str, backend: str, modules: Sequence[str]) -> list[Step]:
    """The steps that build `modules` for `backend` with the FlashInfer on `host`."""
    kernels = _rules.load().kernels_for(family, backend, host.packages.version("flashinfer-python"))
    return [Step(family, backend, m, kernels.builder_for(m) if kernels else None) for m in modules]


def build(step: Step, env: Mapping[str, str], timeout_s: float | None = None) -> str | None:
    """Build one module (its output on stderr); None when it built, else why not."""
    if step.builder is None:
        return f"no generator is known for {step.module}"
    try:
        done = subprocess.run(
            [sys.executable, *_SAFE_PATH, "-c", _BUILD, step.builder],
            env=dict(env),
            stdout=sys.stderr,
            stderr=sys.stderr,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return f"{step.module}: the build ran past {timeout_s:.0f} s"
    except OSError as exc:
        return f"{step.module}: {exc}"
    return None if done.returncode == 0 else f"{step.builder} exited with {done.returncode}"
