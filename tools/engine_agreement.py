"""The rules' predictions beside real vLLM and SGLang releases' own answers, release x compute
capability x FlashInfer present/absent, on a CPU host.

    python tools/engine_agreement.py [--venvs DIR] [--json OUT] [ENGINE-RELEASE ...]

Each release is a real `pip install vllm==V` (or `sglang==V`) in DIR/vllm-V (DIR/sglang-V;
tools/engine_venvs.sh builds them). Its own selection code is asked through fp4doctor's oracle
worker with the device queries stubbed; the compiled extensions load against a stub
libcuda.so.1 built here with gcc, whose every entry point answers CUDA_ERROR_NO_DEVICE (a FAKE
standing for the NVIDIA driver, which a CPU host lacks; nothing of it is called by the
selection code). FlashInfer absent is the same venv with `flashinfer` hidden from the worker's
imports (a sitecustomize on its path: another FAKE, for an install without FlashInfer); SGLang
is asked with FlashInfer only, a dependency of every release asked. The rules judge the facts
the venv's own interpreter probes (its packages, this host's toolchain), with the one GPU asked.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fp4doctor import facts, profile  # noqa: E402
from fp4doctor.oracle import query  # noqa: E402
from fp4doctor.oracle.answers import AS_SET, EngineAnswers  # noqa: E402
from fp4doctor.rules import Evaluation, evaluate  # noqa: E402

RELEASES = (
    ("vllm", "0.18.0"),
    ("vllm", "0.24.0"),
    ("vllm", "0.33.0"),
    ("vllm", "0.34.0"),
    ("sglang", "0.5.16"),
    ("sglang", "0.5.23"),
)
# FlashInfer present (True) and absent (False) per engine: sglang requires flashinfer-python
# (Requires-Dist in every wheel asked), so it is asked with FlashInfer only.
FLASHINFER_CASES = {"vllm": (True, False), "sglang": (True,)}
CAPABILITIES = ((9, 0), (10, 0), (10, 3), (11, 0), (12, 0), (12, 1))
FAMILIES = ("linear", "moe")
FLASHINFER = ("flashinfer-python", "flashinfer-cubin", "flashinfer-jit-cache")
GPU_NAMES = {
    (9, 0): "NVIDIA H200",
    (10, 0): "NVIDIA B200",
    (10, 3): "NVIDIA B300",
    (11, 0): "NVIDIA Thor",
    (12, 0): "NVIDIA RTX PRO 6000",
    (12, 1): "NVIDIA GB10",
}
# What the stub libcuda.so.1 must export: the driver entry points vLLM's extensions link
# against (nm -D --undefined-only vllm/*.so of the four releases), and torch's first calls.
DRIVER_SYMBOLS = (
    "cuCtxGetCurrent",
    "cuCtxSetCurrent",
    "cuDeviceGetAttribute",
    "cuDevicePrimaryCtxRetain",
    "cuDriverGetVersion",
    "cuGetErrorString",
    "cuGetProcAddress",
    "cuGetProcAddress_v2",
    "cuInit",
    "cuDeviceGetCount",
    "cuMemAddressFree",
    "cuMemAddressReserve",
    "cuMemCreate",
    "cuMemGetAllocationGranularity",
    "cuMemMap",
    "cuMemRelease",
    "cuMemSetAccess",
    "cuMemUnmap",
    "cuPointerGetAttribute",
    "cuTensorMapEncodeTiled",
)
HIDE_FLASHINFER = '''"""FAKE (tools/engine_agreement.py): an install without FlashInfer.
The path finder and the metadata finder find nothing of it, as when it is not installed:
find_spec gives None, `import flashinfer` raises ModuleNotFoundError, importlib.metadata knows
no such distribution."""
import importlib.machinery, importlib.metadata, sys

def _hidden(name):
    return name == "flashinfer" or name.startswith("flashinfer.") or name.startswith("flashinfer_")

_find_spec = importlib.machinery.PathFinder.find_spec.__func__
_find_dists = importlib.metadata.MetadataPathFinder.find_distributions.__func__

def find_spec(cls, name, path=None, target=None):
    return None if _hidden(name) else _find_spec(cls, name, path, target)

def find_distributions(cls, context=importlib.metadata.DistributionFinder.Context()):
    for dist in _find_dists(cls, context):
        if not (dist.metadata["Name"] or "").lower().replace("_", "-").startswith("flashinfer"):
            yield dist

importlib.machinery.PathFinder.find_spec = classmethod(find_spec)
importlib.metadata.MetadataPathFinder.find_distributions = classmethod(find_distributions)
'''


def venv_python(venvs: Path, engine: str, release: str) -> Path:
    return venvs / f"{engine}-{release}" / "bin" / "python"


def stub_driver(where: Path) -> Path:
    """Build the stub libcuda.so.1 (gcc) in `where`; returns the directory holding it."""
    source = where / "libcuda_stub.c"
    source.write_text(
        "/* FAKE NVIDIA driver for a CPU host: every entry point says 'no device' (100). */\n"
        + "".join(f"int {name}(void) {{ return 100; }}\n" for name in DRIVER_SYMBOLS)
    )
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-o", str(where / "libcuda.so.1"), str(source)], check=True
    )
    return where


def probed(python: Path, engine: str) -> facts.HostFacts:
    """The facts the venv's interpreter probes (this host's toolchain), with the version of
    every distribution the engine's profile reads as installed there (`probe` alone reads a
    fixed list; `check` adds the profile's own, as here)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [str(python), "-m", "fp4doctor", "probe", "--json"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        handle.write(out)
    try:
        base = facts.load(handle.name)
    finally:
        os.unlink(handle.name)
    names = sorted(profile.load(engine).packages())
    script = (
        "import json, sys\nfrom importlib import metadata\nfound = {}\n"
        "for name in sys.argv[1:]:\n"
        "    try: found[name] = metadata.version(name)\n"
        "    except metadata.PackageNotFoundError: pass\n"
        "print(json.dumps(found))"
    )
    listed = subprocess.run(
        [str(python), "-c", script, *names], capture_output=True, text=True, check=True
    ).stdout
    versions = {**base.packages.versions, **json.loads(listed)}
    return dataclasses.replace(base, packages=dataclasses.replace(base.packages, versions=versions))


def host_for(base: facts.HostFacts, cc: tuple[int, int], flashinfer: bool) -> facts.HostFacts:
    """`base` with one GPU of `cc`, and without FlashInfer's packages when `flashinfer` is off."""
    gpu = facts.Gpu(
        index=0,
        name=GPU_NAMES[cc],
        cc_major=cc[0],
        cc_minor=cc[1],
        memory_total_mib=81920,
        uuid="GPU-00000000-fp4d-0000-0000-000000000000",
        nvml_index=0,
    )
    versions = dict(base.packages.versions)
    if not flashinfer:
        for name in FLASHINFER:
            versions.pop(name, None)
    packages = dataclasses.replace(base.packages, versions=versions)
    nvml = facts.NvmlFacts(
        status=facts.NVML_OK, driver_version="580.95.05", cuda_driver_version="13.0"
    )
    synthetic = "this CPU host's probe under the release's venv, with one GPU of the CC asked"
    return dataclasses.replace(
        base, gpus=[gpu], nvml=nvml, packages=packages, env={}, synthetic=synthetic
    )


def evaluations(
    base: facts.HostFacts, engine: str, release: str, flashinfer: bool
) -> list[Evaluation]:
    prof = profile.load(engine)
    return [
        evaluate(prof, host_for(base, cc, flashinfer), override_version=release, family=family)
        for cc in CAPABILITIES
        for family in FAMILIES
    ]


def ask(
    python: Path,
    driver: Path,
    hide: Path | None,
    engine: str,
    release: str,
    evs: list[Evaluation],
) -> EngineAnswers:
    """One worker under the release's interpreter answers every case of `evs`."""
    cases = [c for e in evs for c in query.cases_for(e)]
    env = worker_env(python, driver, hide)
    asking = query.Asking(engine, title(engine), release, cases, stub=True, package=engine, env=env)
    return asking.answers()


def worker_env(python: Path, driver: Path, hide: Path | None = None) -> dict[str, str]:
    """This environment with the release's interpreter asked (query.ENGINE_PYTHON_ENV: its
    answers are not kept, each run asks), the stub libcuda.so.1 found first and, with `hide`,
    FlashInfer hidden from its imports."""
    return {
        **os.environ,
        query.ENGINE_PYTHON_ENV: str(python),
        "LD_LIBRARY_PATH": str(driver),
        "PYTHONPATH": os.pathsep.join(p for p in (str(hide or ""), str(ROOT)) if p),
    }


def title(engine: str) -> str:
    """The engine's name as its profile spells it ('vLLM', 'SGLang')."""
    return profile.load(engine).title


@dataclasses.dataclass(frozen=True)
class Row:
    target: str  # 'vllm', 'sglang'
    release: str
    flashinfer: bool
    cc: str
    family: str
    rules: str | None
    engine: str  # the backend, or 'raises T'
    agree: bool
    knob_sets: int
    honoured: int
    missed: tuple[str, ...]  # knob sets the engine does not honour: 'label: what it did'


def rows(
    target: str, release: str, flashinfer: bool, evs: list[Evaluation], got: EngineAnswers
) -> list[Row]:
    out = []
    for ev in evs:
        cases = query.cases_for(ev)
        as_set = next(c for c in cases if c.label == AS_SET)
        answer = got.answer(as_set)
        if got.unasked or answer is None:
            engine = f"could not ask: {got.unasked}"
        else:
            engine = f"raises {answer.raised}" if answer.raised else str(answer.backend)
        rules = ev.engine_as_set
        # The rules agree with an engine that raises when they say its pick cannot run here.
        fails_too = bool(answer and answer.raised and rules and not ev.valid(rules))
        knobbed = [c for c in cases if c.label != AS_SET]
        missed = []
        for c in knobbed:
            a = got.answer(c)
            if a is None or a.raised or a.backend != c.label:
                missed.append(f"{c.label} [{c.knobs_text()}]: {a.text() if a else 'no answer'}")
        cc = ev.facts.gpus[0]
        out.append(
            Row(
                target,
                release,
                flashinfer,
                f"{cc.cc_major}.{cc.cc_minor}",
                ev.family,
                rules,
                engine,
                engine == str(rules) or fails_too,
                len(knobbed),
                len(knobbed) - len(missed),
                tuple(missed),
            )
        )
    return out


def run(
    venvs: Path, releases: Iterable[tuple[str, str]], cases: Iterable[bool] = (True, False)
) -> list[Row]:
    out: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        driver = stub_driver(Path(tmp))
        hide = Path(tmp) / "hide"
        hide.mkdir()
        (hide / "sitecustomize.py").write_text(HIDE_FLASHINFER)
        for engine, release in releases:
            python = venv_python(venvs, engine, release)
            if not python.exists():
                print(f"{python}: not installed, skipped", file=sys.stderr)
                continue
            base = probed(python, engine)
            for flashinfer in (c for c in cases if c in FLASHINFER_CASES[engine]):
                evs = evaluations(base, engine, release, flashinfer)
                got = ask(python, driver, None if flashinfer else hide, engine, release, evs)
                out += rows(engine, release, flashinfer, evs, got)
                print(
                    f"{title(engine)} {release}, "
                    f"FlashInfer {'present' if flashinfer else 'absent'}: "
                    f"{sum(r.agree for r in out[-len(evs) :])}/{len(evs)} agree",
                    file=sys.stderr,
                )
    return out


def markdown(found: list[Row]) -> str:
    lines = [
        "| engine | FlashInfer | CC | family | rules predict | the engine's own code | agree "
        "| knob sets honoured |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in found:
        lines.append(
            f"| {title(r.target)} {r.release} | {'yes' if r.flashinfer else 'no'} | {r.cc} | "
            f"{r.family} | "
            f"{r.rules} | {r.engine} | {'yes' if r.agree else '**no**'} | "
            f"{r.honoured}/{r.knob_sets} |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "releases",
        nargs="*",
        metavar="ENGINE-RELEASE",
        default=[f"{e}-{v}" for e, v in RELEASES],
        help="vllm-0.34.0, sglang-0.5.23, ... (default: every release of RELEASES)",
    )
    parser.add_argument(
        "--venvs", type=Path, default=Path(os.environ.get("FP4DOCTOR_ENGINE_VENVS", "/work/venvs"))
    )
    parser.add_argument("--json", type=Path, help="also write the rows as JSON here")
    parser.add_argument("--flashinfer", choices=("both", "present", "absent"), default="both")
    args = parser.parse_args()
    present = {"both": (True, False), "present": (True,), "absent": (False,)}[args.flashinfer]
    releases = [tuple(name.split("-", 1)) for name in args.releases]
    unknown = [
        n for n, r in zip(args.releases, releases, strict=True) if r[0] not in FLASHINFER_CASES
    ]
    if unknown or any(len(r) != 2 for r in releases):
        parser.error(f"{' '.join(unknown) or args.releases}: give ENGINE-RELEASE, "
                     f"ENGINE one of {', '.join(FLASHINFER_CASES)}")  # fmt: skip
    found = run(args.venvs, [(r[0], r[1]) for r in releases], present)
    print(markdown(found))
    for r in found:
        for m in r.missed:
            print(
                f"{title(r.target)} {r.release} FI={'yes' if r.flashinfer else 'no'} "
                f"CC {r.cc} {r.family}: {m}",
                file=sys.stderr,
            )
    if args.json:
        args.json.write_text(json.dumps([dataclasses.asdict(r) for r in found], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
