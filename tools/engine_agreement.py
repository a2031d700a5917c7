"""The rules' predictions beside real vLLM and SGLang releases' own answers, release x scenario x
compute capability x family, on a CPU host.

    python tools/engine_agreement.py [--venvs DIR] [--json OUT] [--scenario NAME ...]
                                     [--flashinfer-wheel WHEEL] [ENGINE-RELEASE ...]

Each release is a real `pip install vllm==V` (or `sglang==V`) in DIR/vllm-V (DIR/sglang-V;
tools/engine_venvs.sh builds them). Its own selection code is asked through fp4doctor's oracle
worker with the device queries stubbed; the compiled extensions load against a stub
libcuda.so.1 built here with gcc, whose every entry point answers CUDA_ERROR_NO_DEVICE (a FAKE
standing for the NVIDIA driver, which a CPU host lacks; nothing of it is called by the
selection code). The rules judge the facts the venv's own interpreter probes (its packages,
this host's toolchain), with the one GPU asked, changed as each scenario says (SCENARIOS):
- FlashInfer absent, or its cubin packages absent: the same venv with those distributions
  hidden from the worker's imports and metadata (a sitecustomize on its path: a FAKE for an
  install without them);
- nvcc under CUDA_HOME only, or no nvcc: the worker's PATH without this host's nvcc (and, for
  none, CUDA_HOME at no toolkit), the facts' toolchain to match;
- FlashInfer off the engine's pin: a real older flashinfer-python wheel (--flashinfer-wheel)
  unpacked ahead of the venv's on the worker's path;
- in the base scenario, besides the knobs as set and every knob set `env` writes: the
  variables and flags a user sets (USER_SETTINGS), `env`'s knobs after an earlier `env` left
  its variables set, and each checkpoint format's layer class per family (FORMATS, judged with
  the fixture checkpoint's fold, asked as W4A4 or weight-only layers).
SGLang is asked with FlashInfer present only, a dependency of every release asked.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fp4doctor import facts, profile  # noqa: E402
from fp4doctor.oracle import query  # noqa: E402
from fp4doctor.oracle.answers import AS_SET, Case, EngineAnswers  # noqa: E402
from fp4doctor.profile.model import Profile  # noqa: E402
from fp4doctor.rules import Evaluation, evaluate  # noqa: E402
from fp4doctor.selection.engine import engine_as_set, family_pick  # noqa: E402

RELEASES = (
    ("vllm", "0.18.0"),
    ("vllm", "0.24.0"),
    ("vllm", "0.33.0"),
    ("vllm", "0.34.0"),
    ("sglang", "0.5.16"),
    ("sglang", "0.5.23"),
)
CAPABILITIES = ((9, 0), (10, 0), (10, 3), (11, 0), (12, 0), (12, 1))
FAMILIES = ("linear", "moe")
FLASHINFER = ("flashinfer-python", "flashinfer-cubin", "flashinfer-jit-cache")
CUBINS = ("flashinfer-cubin", "flashinfer-jit-cache")
GPU_NAMES = {
    (9, 0): "NVIDIA H200",
    (10, 0): "NVIDIA B200",
    (10, 3): "NVIDIA B300",
    (11, 0): "NVIDIA Thor",
    (12, 0): "NVIDIA RTX PRO 6000",
    (12, 1): "NVIDIA GB10",
}
NO_TOOLKIT = "/nonexistent/fp4doctor-no-cuda"  # CUDA_HOME with no bin/nvcc under it


@dataclasses.dataclass(frozen=True)
class Scenario:
    """One install and toolchain: what the facts hold and what the worker sees."""

    name: str
    engines: tuple[str, ...] = ("vllm", "sglang")
    flashinfer: bool = True  # FlashInfer installed
    cubins: bool = True  # flashinfer-cubin and flashinfer-jit-cache, where the venv has them
    nvcc: str = "path"  # this host's nvcc on PATH | "home": under CUDA_HOME only | "none"
    off_pin: bool = False  # an older flashinfer-python ahead of the venv's (--flashinfer-wheel)
    user: bool = False  # also user-set variables and flags, env after env, checkpoint formats


SCENARIOS = (
    Scenario("base", user=True),
    Scenario("no-flashinfer", engines=("vllm",), flashinfer=False),
    Scenario("nvcc-home-only", engines=("vllm",), cubins=False, nvcc="home"),
    Scenario("no-nvcc", engines=("vllm",), cubins=False, nvcc="none"),
    Scenario("flashinfer-off-pin", off_pin=True),
)
# What a user sets, per engine and family: (first release that reads it, variables, flags).
USER_SETTINGS: dict[tuple[str, str], tuple[tuple[str, dict[str, str], tuple[str, ...]], ...]] = {
    ("vllm", "linear"): (
        ("0.20", {"VLLM_DISABLED_KERNELS": "FlashInferCuteDslNvFp4LinearKernel"}, ()),
        (
            "0.20",
            {
                "VLLM_DISABLED_KERNELS": "FlashInferCutlassNvFp4LinearKernel,"
                "CutlassNvFp4LinearKernel"
            },
            (),
        ),
        ("0.22", {}, ("--linear-backend=triton",)),
        ("0.24", {}, ("--linear-backend=flashinfer_cutedsl",)),
    ),
    ("sglang", "linear"): (("0.5.19", {"SGLANG_FLASHINFER_CUTEDSL_NVFP4_W4A16": "1"}, ()),),
}
# The variables `env --prefer flashinfer-cutedsl-w4a16` leaves set, per engine, from the
# release that writes them: `env` run again for another backend must undo them.
LEFT_BY_ENV = {
    "vllm": ("0.30", {"VLLM_DISABLED_KERNELS": "FlashInferCuteDslNvFp4LinearKernel"}),
    "sglang": ("0.5.19", {"SGLANG_FLASHINFER_CUTEDSL_NVFP4_W4A16": "1"}),
}
# Each checkpoint format's layer class per family, judged with a fixture checkpoint of it.
CHECKPOINTS = ROOT / "tests" / "fixtures" / "checkpoints"
FORMATS = {
    "linear": (("modelopt-nvfp4", "llama-3.1-8b-instruct-fp4"), ("ct-nvfp4", "qwen3-32b-nvfp4"),
               ("ct-nvfp4a16", "llama-3.1-8b-instruct-nvfp4a16")),
    "moe": (("modelopt-nvfp4", "qwen3-30b-a3b-fp4"), ("ct-nvfp4a16", "qwen3-30b-a3b-nvfp4a16")),
}  # fmt: skip
HIDE = """\"\"\"FAKE (tools/engine_agreement.py): an install without {names}.
The path finder and the metadata finder find nothing of them, as when they are not installed:
find_spec gives None, `import` raises ModuleNotFoundError, importlib.metadata knows no such
distribution.\"\"\"
import importlib.machinery, importlib.metadata

_DISTS = {dists!r}
_MODULES = {modules!r}

def _hidden(name):
    return any(name == m or name.startswith(m + ".") for m in _MODULES)

_find_spec = importlib.machinery.PathFinder.find_spec.__func__
_find_dists = importlib.metadata.MetadataPathFinder.find_distributions.__func__

def find_spec(cls, name, path=None, target=None):
    return None if _hidden(name) else _find_spec(cls, name, path, target)

def find_distributions(cls, context=importlib.metadata.DistributionFinder.Context()):
    for dist in _find_dists(cls, context):
        if (dist.metadata["Name"] or "").lower().replace("_", "-") not in _DISTS:
            yield dist

importlib.machinery.PathFinder.find_spec = classmethod(find_spec)
importlib.metadata.MetadataPathFinder.find_distributions = classmethod(find_distributions)
"""
# The top-level modules of each distribution hidden.
MODULES = {
    "flashinfer-python": ("flashinfer",),
    "flashinfer-cubin": ("flashinfer_cubin",),
    "flashinfer-jit-cache": ("flashinfer_jit_cache",),
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


def hide_dir(where: Path, dists: tuple[str, ...]) -> Path:
    """A directory holding a sitecustomize that hides `dists` (HIDE)."""
    where.mkdir(parents=True, exist_ok=True)
    modules = sorted(m for d in dists for m in MODULES[d])
    (where / "sitecustomize.py").write_text(
        HIDE.format(names=", ".join(dists), dists=sorted(dists), modules=modules)
    )
    return where


def host_for(
    base: facts.HostFacts,
    cc: tuple[int, int],
    flashinfer: bool | Scenario,
    env: dict[str, str] | None = None,
) -> facts.HostFacts:
    """`base` with one GPU of `cc`, as the scenario changes it (a bool: FlashInfer present or
    not), and the variables `env` set."""
    sc = flashinfer if isinstance(flashinfer, Scenario) else Scenario("", flashinfer=flashinfer)
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
    for name in hidden(sc, versions):
        versions.pop(name, None)
    if sc.off_pin and "flashinfer-python" in versions:
        versions["flashinfer-python"] = OFF_PIN[0]
    packages = dataclasses.replace(base.packages, versions=versions)
    tc = base.toolchain
    # (nvcc_on_path: a field of the facts from this change on; a checkout before it has none.)
    unset: dict[str, Any] = {"nvcc_on_path": None} if hasattr(tc, "nvcc_on_path") else {}
    if sc.nvcc == "home":
        home = str(Path(tc.nvcc_path or "/usr/local/cuda/bin/nvcc").resolve().parents[1])
        tc = dataclasses.replace(tc, cuda_home=home, cuda_home_source="CUDA_HOME",
                                 nvcc_path=f"{home}/bin/nvcc", **unset)  # fmt: skip
    elif sc.nvcc == "none":
        tc = dataclasses.replace(tc, cuda_home=None, cuda_home_source=None, nvcc_path=None,
                                 nvcc_version=None, **unset)  # fmt: skip
    nvml = facts.NvmlFacts(
        status=facts.NVML_OK, driver_version="580.95.05", cuda_driver_version="13.0"
    )
    synthetic = "this CPU host's probe under the release's venv, with one GPU of the CC asked"
    return dataclasses.replace(
        base, gpus=[gpu], nvml=nvml, packages=packages, toolchain=tc, env=dict(env or {}),
        synthetic=synthetic,
    )  # fmt: skip


OFF_PIN: list[str] = ["0.6.3"]  # the version of the --flashinfer-wheel given


def hidden(sc: Scenario, versions: dict[str, str]) -> tuple[str, ...]:
    """The FlashInfer distributions the scenario hides (those the venv has)."""
    names = FLASHINFER if not sc.flashinfer else CUBINS if not sc.cubins else ()
    return tuple(n for n in names if n in versions)


def evaluations(
    base: facts.HostFacts,
    engine: str,
    release: str,
    flashinfer: bool | Scenario,
    env: dict[str, str] | None = None,
) -> list[Evaluation]:
    prof = profile.load(engine)
    return [
        evaluate(prof, host_for(base, cc, flashinfer, env), override_version=release, family=family)
        for cc in CAPABILITIES
        for family in FAMILIES
    ]


def worker_env(
    python: Path, driver: Path, hide: Path | None = None, sc: Scenario | None = None,
    overlay: Path | None = None,
) -> dict[str, str]:  # fmt: skip
    """This environment with the release's interpreter asked (query.ENGINE_PYTHON_ENV: its
    answers are not kept, each run asks), the stub libcuda.so.1 found first, with `hide`
    hiding distributions from its imports, `overlay` ahead on its path, and the scenario's
    toolchain (this host's nvcc off PATH; for none, CUDA_HOME at no toolkit)."""
    env = {
        **os.environ,
        query.ENGINE_PYTHON_ENV: str(python),
        "LD_LIBRARY_PATH": str(driver),
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(hide or ""), str(overlay or ""), str(ROOT)) if p
        ),
    }
    if sc is not None and sc.nvcc != "path":
        path = env.get("PATH", os.defpath).split(os.pathsep)
        env["PATH"] = os.pathsep.join(d for d in path if not (Path(d or ".") / "nvcc").exists())
        nvcc = shutil.which("nvcc")
        home = str(Path(nvcc).resolve().parents[1]) if nvcc else NO_TOOLKIT
        env["CUDA_HOME"] = env["CUDA_PATH"] = home if sc.nvcc == "home" else NO_TOOLKIT
    return env


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
    scenario: str = "base"
    case: str = "as set"  # 'as set', 'VAR=value', '--flag=value', 'format ct-nvfp4a16', ...
    cls: str = ""  # the issue-40 class the row measures ('' for the automatic picks)
    message: str = ""  # what the engine raised, when it did


@dataclasses.dataclass(frozen=True)
class Question:
    """What one row asks: its cases (the knobs as set, then the knob sets), and the rules."""

    ev: Evaluation
    as_set: Case
    knobbed: tuple[Case, ...]
    rules: str | None
    case: str = "as set"
    cls: str = ""


def questions(base: facts.HostFacts, engine: str, release: str, sc: Scenario) -> list[Question]:
    """Every row's question for the scenario."""
    out = []
    # The automatic picks: issue 40's class 5 where nvcc is under CUDA_HOME only.
    cls = "5" if sc.nvcc == "home" else "" if sc.name == "base" else sc.name
    for ev in evaluations(base, engine, release, sc):
        cases = query.cases_for(ev)
        as_set = next(c for c in cases if c.label == AS_SET)
        knobbed = tuple(c for c in cases if c.label != AS_SET)
        out.append(Question(ev, as_set, knobbed, engine_as_set(ev), cls=cls))
    if not sc.user:
        return out
    prof = profile.load(engine)
    for cc in CAPABILITIES:
        for family in FAMILIES:
            for since, env, args in USER_SETTINGS.get((engine, family), ()):
                if Version(release) < Version(since):
                    continue
                ev = evaluate(prof, host_for(base, cc, sc, env), override_version=release,
                              family=family)  # fmt: skip
                cases = query.cases_for(ev)
                as_set = dataclasses.replace(next(c for c in cases if c.label == AS_SET), args=args)
                what = " ".join([*(f"{k}={v}" for k, v in env.items()), *args])
                cls = "6" if args else "3"
                out.append(Question(ev, as_set, (), _as_set(ev, args), what, cls))
            left = LEFT_BY_ENV.get(engine)
            if left and family == "linear" and Version(release) >= Version(left[0]):
                ev = evaluate(prof, host_for(base, cc, sc, left[1]), override_version=release,
                              family=family)  # fmt: skip
                cases = query.cases_for(ev)
                as_set = next(c for c in cases if c.label == AS_SET)
                knobbed = tuple(c for c in cases if c.label != AS_SET)
                what = "env after env: " + " ".join(f"{k}={v}" for k, v in left[1].items())
                out.append(Question(ev, as_set, knobbed, engine_as_set(ev), what, "3"))
            for fmt, fixture in FORMATS[family]:
                q = _format_question(prof, base, cc, sc, release, family, fmt, fixture)
                if q is not None:
                    out.append(q)
    return out


def _as_set(ev: Evaluation, args: tuple[str, ...]) -> str | None:
    """The rules' answer with `args` given: selection.engine.as_set where this checkout has it (the
    flags modelled), else the variables as set alone (a checkout before it)."""
    import fp4doctor.selection.engine as pick

    as_set = getattr(pick, "as_set", None)
    return as_set(ev, args) if as_set is not None else engine_as_set(ev)


def _format_question(
    prof: Profile, base: facts.HostFacts, cc: tuple[int, int], sc: Scenario, release: str,
    family: str, fmt: str, fixture: str,
) -> Question | None:  # fmt: skip
    """The family's layer class of a checkpoint format: the rules judge the fixture's fold and
    the engine is asked for a W4A4 or a weight-only layer, as the format's layers are."""
    from fp4doctor import checkpoint
    from fp4doctor.checkpoint import constraints, judge

    ckpt = checkpoint.load(str(CHECKPOINTS / fixture))
    ev = evaluate(prof, host_for(base, cc, sc), override_version=release, family=family)
    model = judge.judge(ckpt, prof, release, constraints.load())
    folded = model.fold(ev)
    a16 = folded.weight_only
    # Per (engine, family) here; per engine in a checkout before it (the before/after runs).
    table: Any = query.WEIGHT_ONLY
    formats = table.get((prof.target, family), table.get(prof.target, ()))
    if a16 and formats is not None and fmt not in formats:
        return None  # the engine chooses nothing for this format's layers: not asked
    cases = query.cases_for(ev)
    as_set = dataclasses.replace(next(c for c in cases if c.label == AS_SET), a16=a16)
    return Question(ev, as_set, (), family_pick(folded).backend, f"format {fmt}", "1")


def ask(
    python: Path,
    driver: Path,
    hide: Path | None,
    engine: str,
    release: str,
    evs: list[Evaluation] | list[Question],
    sc: Scenario | None = None,
    overlay: Path | None = None,
) -> EngineAnswers:
    """One worker under the release's interpreter answers every case of `evs`."""
    cases: list[Case] = []
    for q in evs:
        if isinstance(q, Question):
            cases += [q.as_set, *q.knobbed]
        else:
            cases += query.cases_for(q)
    env = worker_env(python, driver, hide, sc, overlay)
    unique = list(dict.fromkeys(cases))
    asking = query.Asking(engine, title(engine), release, unique, stub=True, package=engine,
                          env=env)  # fmt: skip
    return asking.answers()


def title(engine: str) -> str:
    """The engine's name as its profile spells it ('vLLM', 'SGLang')."""
    return profile.load(engine).title


def rows(
    target: str,
    release: str,
    flashinfer: bool,
    evs: list[Evaluation] | list[Question],
    got: EngineAnswers,
    scenario: str = "base",
) -> list[Row]:
    out = []
    for q in evs:
        if not isinstance(q, Question):
            cases = query.cases_for(q)
            as_set = next(c for c in cases if c.label == AS_SET)
            q = Question(q, as_set, tuple(c for c in cases if c.label != AS_SET), engine_as_set(q))
        ev = q.ev
        answer = got.answer(q.as_set)
        if got.unasked:
            engine = f"could not ask: {got.unasked}"
        elif answer is None:
            continue  # the adapter does not ask this release such a layer
        else:
            engine = f"raises {answer.raised}" if answer.raised else str(answer.backend)
        rules = q.rules
        # The rules agree with an engine that raises (or whose selection code does not even
        # import) when they say its pick cannot run here, that it stops (no pick), or that the
        # engine itself cannot start (a blocking `engine.*` finding: FlashInfer's packages at
        # different versions, whose import raises).
        stops = any(f.status.blocking and f.id.startswith("engine.") for f in ev.host)
        raised = got.unasked is not None or bool(answer and answer.raised)
        fails_too = raised and (rules is None or not ev.valid(rules) or stops)
        missed = []
        for c in q.knobbed:
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
                len(q.knobbed),
                len(q.knobbed) - len(missed),
                tuple(missed),
                scenario,
                q.case,
                q.cls,
                (answer.message or "") if answer is not None and answer.raised else "",
            )
        )
    return out


def run(
    venvs: Path,
    releases: Iterable[tuple[str, str]],
    cases: Iterable[bool] = (True, False),
    scenarios: Iterable[Scenario] = SCENARIOS,
    wheel: Path | None = None,
) -> list[Row]:
    out: list[Row] = []
    wanted = list(scenarios)
    with tempfile.TemporaryDirectory() as tmp:
        driver = stub_driver(Path(tmp))
        overlay = unpacked(wheel, Path(tmp) / "overlay") if wheel else None
        for engine, release in releases:
            python = venv_python(venvs, engine, release)
            if not python.exists():
                print(f"{python}: not installed, skipped", file=sys.stderr)
                continue
            base = probed(python, engine)
            for sc in wanted:
                if engine not in sc.engines or sc.flashinfer not in cases:
                    continue
                if sc.off_pin and overlay is None:
                    print(f"{sc.name}: skipped (no --flashinfer-wheel)", file=sys.stderr)
                    continue
                names = hidden(sc, dict(base.packages.versions))
                hide = hide_dir(Path(tmp) / f"hide-{sc.name}", names) if names else None
                qs = questions(base, engine, release, sc)
                got = ask(python, driver, hide, engine, release, qs, sc,
                          overlay if sc.off_pin else None)  # fmt: skip
                found = rows(engine, release, sc.flashinfer, qs, got, sc.name)
                out += found
                print(
                    f"{title(engine)} {release}, {sc.name}: "
                    f"{sum(r.agree for r in found)}/{len(found)} agree, knob sets "
                    f"{sum(r.honoured for r in found)}/{sum(r.knob_sets for r in found)}",
                    file=sys.stderr,
                )
    return out


def unpacked(wheel: Path, where: Path) -> Path:
    """The wheel unpacked in `where` (a directory to put ahead on the path); its version is
    the off-pin FlashInfer the facts hold (OFF_PIN)."""
    import zipfile

    where.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as z:
        z.extractall(where)
    OFF_PIN[0] = wheel.name.split("-")[1]
    return where


def markdown(found: list[Row]) -> str:
    lines = [
        "| engine | scenario | case | CC | family | rules predict | the engine's own code "
        "| agree | knob sets honoured |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in found:
        lines.append(
            f"| {title(r.target)} {r.release} | {r.scenario} | {r.case} | {r.cc} | "
            f"{r.family} | {r.rules} | {r.engine} | {'yes' if r.agree else '**no**'} | "
            f"{r.honoured}/{r.knob_sets} |"
        )
    return "\n".join(lines) + "\n"


def summary(found: list[Row]) -> str:
    """Per release and scenario: the picks that agree and the knob sets honoured; then per
    issue-40 class."""
    lines = [
        "| engine | scenario | picks agree | knob sets honoured |",
        "| --- | --- | --- | --- |",
    ]
    groups: dict[tuple[str, str, str], list[Row]] = {}
    for r in found:
        groups.setdefault((r.target, r.release, r.scenario), []).append(r)
    for (target, release, scenario), rs in groups.items():
        lines.append(
            f"| {title(target)} {release} | {scenario} | {sum(r.agree for r in rs)}/{len(rs)} | "
            f"{sum(r.honoured for r in rs)}/{sum(r.knob_sets for r in rs)} |"
        )
    total = f"| all | | {sum(r.agree for r in found)}/{len(found)} | "
    lines.append(total + f"{sum(r.honoured for r in found)}/{sum(r.knob_sets for r in found)} |")
    lines += ["", "| class | rows agree | knob sets honoured |", "| --- | --- | --- |"]
    for cls in sorted({r.cls for r in found}):
        rs = [r for r in found if r.cls == cls]
        lines.append(
            f"| {cls or 'automatic picks (base)'} | {sum(r.agree for r in rs)}/{len(rs)} | "
            f"{sum(r.honoured for r in rs)}/{sum(r.knob_sets for r in rs)} |"
        )
    differ, asked = facts_engine(found)
    lines.append(f"| 2 (another install's facts) | {differ} of {asked} answers of this install's "
                 "engine differ from the facts' engine's | |")  # fmt: skip
    return "\n".join(lines) + "\n"


def facts_engine(found: list[Row]) -> tuple[int, int]:
    """Issue 40 class 2: of the automatic picks asked in a scenario whose install is not this
    venv's as it stands (FlashInfer absent or off its pin, no cubins, nvcc elsewhere), how many
    this venv's engine, asked unchanged, answers otherwise than that install's engine does:
    (differ, asked). Each is an answer a `check --facts` of such a host took from the wrong
    engine before oracle/sameness.py (which hides what the facts lack, or does not ask)."""
    base = {(r.target, r.release, r.cc, r.family): r.engine
            for r in found if r.scenario == "base" and r.case == "as set"}  # fmt: skip
    others = [r for r in found if r.scenario != "base" and r.case == "as set"]
    mine = [(r, base.get((r.target, r.release, r.cc, r.family))) for r in others]
    asked = [(r, b) for r, b in mine if b is not None]
    return sum(r.engine != b for r, b in asked), len(asked)


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
    names = [s.name for s in SCENARIOS]
    parser.add_argument("--scenario", action="append", choices=names, help="only these")
    parser.add_argument(
        "--flashinfer-wheel", type=Path, help="an older flashinfer-python wheel (off-pin scenario)"
    )
    parser.add_argument("--rows", action="store_true", help="also print every row")
    args = parser.parse_args()
    present = {"both": (True, False), "present": (True,), "absent": (False,)}[args.flashinfer]
    releases = [tuple(name.split("-", 1)) for name in args.releases]
    engines = {e for s in SCENARIOS for e in s.engines}
    unknown = [n for n, r in zip(args.releases, releases, strict=True) if r[0] not in engines]
    if unknown or any(len(r) != 2 for r in releases):
        parser.error(f"{' '.join(unknown) or args.releases}: give ENGINE-RELEASE, "
                     f"ENGINE one of {', '.join(sorted(engines))}")  # fmt: skip
    chosen = [s for s in SCENARIOS if not args.scenario or s.name in args.scenario]
    found = run(args.venvs, [(r[0], r[1]) for r in releases], present, chosen,
                args.flashinfer_wheel)  # fmt: skip
    print(summary(found))
    if args.rows:
        print(markdown(found))
    for r in found:
        if not r.agree:
            print(f"{title(r.target)} {r.release} {r.scenario} [{r.case}] CC {r.cc} {r.family}: "
                  f"rules {r.rules}, engine {r.engine} {r.message}", file=sys.stderr)  # fmt: skip
        for m in r.missed:
            print(f"{title(r.target)} {r.release} {r.scenario} [{r.case}] CC {r.cc} "
                  f"{r.family}: {m}", file=sys.stderr)  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps([dataclasses.asdict(r) for r in found], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
