"""profiles/vllm.yaml against the program-extracted release data, release by release.

tools/extract/data/vllm.json holds what tools/extract/vllm.py read from every released vLLM wheel
with NVFP4 code (0.8.0 to the newest; fields in tools/extract/README.md, `## vllm`). For each
release this module checks that the profile, evaluated at that version, says the same: which FP4
variables exist and what they accept, which are deprecated, which variables the era reads, the
precedence of the knobs, the `--linear-backend` values that reach an NVFP4 kernel, the automatic
order, each kernel's compute-capability gate at CC 75/80/90/100/103/110/120/121, and what
`has_flashinfer()` needs. Releases older than the profile's first era must get no verdict.

Where the profile is deliberately coarser or finer than the data, the test says so in place
(`DOCUMENTED`), never by skipping. No network: the JSON is read once per module.
"""

from __future__ import annotations

import dataclasses
import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from packaging.version import Version

from fp4doctor import facts, profile
from fp4doctor.checkpoint import constraints
from fp4doctor.doctor import Outcome, Question, diagnose
from fp4doctor.facts import Gpu, HostFacts
from fp4doctor.profile.kinds.any_of import AnyOf
from fp4doctor.profile.kinds.base import Requirement
from fp4doctor.profile.kinds.compute_capability import ComputeCapability
from fp4doctor.profile.kinds.use import Use
from fp4doctor.profile.model import Era, Knob
from fp4doctor.rules import EngineVersion, Evaluation, era_for, evaluate
from fp4doctor.rules.backends import conditions_hold
from fp4doctor.selection.engine import engine_auto
from fp4doctor.versions import bounds, release_of

ROOT = Path(__file__).resolve().parent.parent
DATA: dict[str, Any] = json.loads(
    (ROOT / "tools" / "extract" / "data" / "vllm.json").read_text(encoding="utf-8")
)
RELEASES: dict[str, dict[str, Any]] = DATA["releases"]
VLLM = profile.load("vllm")
FIRST = bounds(VLLM.eras[0].versions)[0]
assert FIRST is not None
COVERED = [v for v in DATA["covers"] if release_of(v) >= FIRST]
OLDER = [v for v in DATA["covers"] if release_of(v) < FIRST]
HOST_FILE = Path(__file__).parent / "fixtures" / "hosts" / "b200.json"
BASE = facts.load(HOST_FILE)
# The conditions profiles/common/flashinfer.yaml brings in: FlashInfer's own gates, which the
# vLLM data does not describe (tests/test_profiles_shipped.py checks them against FlashInfer's).
FLASHINFER_MODULE = set(
    yaml.safe_load((ROOT / "profiles" / "common" / "flashinfer.yaml").read_text())["conditions"]
)

# vLLM's NVFP4 linear kernel classes, and the profile backend each one is.
KERNEL_BACKEND = {
    "FlashInferCuteDslNvFp4LinearKernel": "flashinfer-cutedsl",
    "FlashInferCutlassNvFp4LinearKernel": "flashinfer-cutlass",
    "FlashInferB12xNvFp4LinearKernel": "flashinfer-b12x",
    "FlashInferTrtllmNvFp4LinearKernel": "flashinfer-trtllm",
    "FlashInferCudnnNvFp4LinearKernel": "flashinfer-cudnn",
    "FlashInferCuteDslNvFp4W4A16LinearKernel": "flashinfer-cutedsl-w4a16",
    "CutlassNvFp4LinearKernel": "cutlass",
    "MarlinNvFp4LinearKernel": "marlin",
    "FbgemmNvFp4LinearKernel": "fbgemm",
    "B12xNvFp4LinearKernel": "b12x",
    "B12xNvFp4W4A16LinearKernel": "b12x-w4a16",
    "TorchNvFp4LinearKernel": "torch",
    "EmulationNvFp4LinearKernel": "emulation",
    "HummingNvFp4LinearKernel": "humming",
}
# Before the kernel registry (0.20): the literal backends of the selection if/elif chain.
CHAIN_BACKEND = {
    "'flashinfer-cutlass'": "flashinfer-cutlass",
    "'cutlass'": "cutlass",
    "'marlin'": "marlin",
    "NvFp4LinearBackend.FLASHINFER_CUTLASS": "flashinfer-cutlass",
    "NvFp4LinearBackend.VLLM_CUTLASS": "cutlass",
    "NvFp4LinearBackend.MARLIN": "marlin",
}
# The variables that choose the NVFP4 dense GEMM, and the ones the selection otherwise reads.
GEMM_ENV = (
    "VLLM_USE_TRTLLM_FP4_GEMM",
    "VLLM_NVFP4_GEMM_BACKEND",
    "VLLM_USE_FBGEMM",
    "VLLM_USE_NVFP4_CT_EMULATIONS",
)
FILE_READ = (*GEMM_ENV, "VLLM_HAS_FLASHINFER_CUBIN")  # read anywhere in the files read
SELECTOR_READ = ("VLLM_BATCH_INVARIANT", "VLLM_DISABLED_KERNELS")  # read by the NVFP4 selector
TRACKED = (*FILE_READ, *SELECTOR_READ)
CCS = (75, 80, 90, 100, 103, 107, 110, 120, 121)


def era(version: str) -> Era:
    chosen, engine = era_for(VLLM, EngineVersion(version, "--engine-version"))
    assert engine.covered, version
    return chosen


def knob(e: Era, name: str) -> Knob | None:
    return next((k for k in e.knobs if k.name == name), None)


def linear(version: str) -> dict[str, Any]:
    out: dict[str, Any] = RELEASES[version]["linear"]
    return out


def registry(version: str) -> list[str] | None:
    """_POSSIBLE_NVFP4_KERNELS[CUDA] (0.20+), None before."""
    order = linear(version).get("auto_order")
    return None if order is None else list(order["kernels"])


# --- hosts --------------------------------------------------------------------------------------


@cache
def rich_host(cc: int) -> HostFacts:
    """One GPU of `cc` with everything any backend could want installed, so that what is left
    to decide is the compute capability (FlashInfer 0.7.4 and its cubins, CuTe DSL, cuDNN 9.15,
    b12x, FBGEMM, Humming, a CUDA 13.0 torch, nvcc 13.0 and ninja)."""
    gpu = Gpu(0, f"synthetic SM{cc}", cc // 10, cc % 10, 80000)
    versions = {
        "torch": "2.9.1",
        "flashinfer-python": "0.7.4",
        "flashinfer-cubin": "0.7.4",
        "nvidia-cudnn-frontend": "1.17.0",
        "nvidia-cudnn-cu13": "9.15.0.57",
        "nvidia-cutlass-dsl": "4.3.4",
        "fbgemm-gpu-genai": "1.4.0",
        "b12x": "0.1.0",
        "humming-kernels": "0.1.0",
    }
    packages = dataclasses.replace(BASE.packages, versions=versions, torch_cuda="13.0")
    cudnn = dataclasses.replace(
        BASE.cudnn, frontend=dataclasses.replace(BASE.cudnn.frontend, version=91500)
    )
    toolchain = dataclasses.replace(BASE.toolchain, nvcc_version="13.0")
    return dataclasses.replace(
        BASE, gpus=[gpu], packages=packages, cudnn=cudnn, toolchain=toolchain, env={}
    )


@cache
def judged(version: str, cc: int) -> Evaluation:
    return evaluate(VLLM, rich_host(cc), override_version=version)


def flashinfer_only_host(**env: str) -> HostFacts:
    """A B200 with flashinfer-python and nothing that supplies its kernels (no flashinfer-cubin,
    no nvcc, no ninja): what has_flashinfer() decides is then down to its own checks."""
    versions = {k: v for k, v in BASE.packages.versions.items() if k != "flashinfer-cubin"}
    packages = dataclasses.replace(BASE.packages, versions=versions)
    toolchain = dataclasses.replace(BASE.toolchain, nvcc_path=None, nvcc_version=None)
    toolchain = dataclasses.replace(toolchain, ninja_path=None)
    return dataclasses.replace(BASE, packages=packages, toolchain=toolchain, env=dict(env))


# --- rules of the profile ---------------------------------------------------------------------


def engine_cc_rules(reqs: tuple[Requirement, ...]) -> list[Requirement]:
    """The compute-capability rules a backend states for vLLM itself: named conditions of this
    profile expanded, FlashInfer's own conditions (the module) left out."""
    out: list[Requirement] = []
    for req in reqs:
        if isinstance(req.kind, Use):
            if req.kind.name not in FLASHINFER_MODULE:
                out += engine_cc_rules(req.children)
        elif req.per_gpu:
            out.append(req)
    return out


def engine_accepts(backend: str, ev: Evaluation) -> bool:
    gpu = ev.facts.gpus[0]
    rules = [r for r in engine_cc_rules(VLLM.backends[backend].requires) if r.applies(ev.context)]
    return all(r.check(ev.context, gpu).ok for r in rules)


def general_step(e: Era, backend: str) -> tuple[Requirement, ...]:
    """The conditions of `backend`'s own place in the automatic order (its last step: an
    earlier one is a CC-specific move ahead, e.g. Humming before Marlin on SM90)."""
    steps = [s for s in e.auto if s.backend == backend]
    assert steps, f"{backend} is not in the automatic order of {e.versions}"
    return steps[-1].conditions


def uses(reqs: tuple[Requirement, ...], name: str) -> bool:
    return any(
        isinstance(r.kind, Use) and (r.kind.name == name or uses(r.children, name)) for r in reqs
    )


# --- releases the profile does not cover ---------------------------------------------------------


def test_the_data_covers_every_release_of_the_profile() -> None:
    assert DATA["project"] == "vllm"
    assert Version(DATA["covers"][-1]) == Version(VLLM.engine.newest_known)
    assert OLDER and all(v.startswith("0.8.") for v in OLDER)


@pytest.mark.parametrize("version", OLDER)
def test_releases_before_the_first_era_get_no_verdict(version: str) -> None:
    # These releases have NVFP4 code (ModelOpt, CUTLASS only, raising elsewhere); the profile
    # starts at 0.9.0, the first with the Marlin fallback, and says nothing about them.
    selections = linear(version)["selectors"][0]["selections"]
    assert [s.get("raise") is not None for s in selections] == [True]
    assert "is_fp4_marlin_supported" not in linear(version)["helpers"]
    report = diagnose(Question(target="vllm", facts_file=str(HOST_FILE), engine_version=version))
    assert report.outcome is Outcome.NO_VERDICT


def test_the_first_era_starts_where_marlin_arrives() -> None:
    first = COVERED[0]
    assert Version(first) == FIRST
    assert "is_fp4_marlin_supported" in linear(first)["helpers"]
    report = diagnose(Question(target="vllm", facts_file=str(HOST_FILE), engine_version=first))
    assert report.outcome is not Outcome.NO_VERDICT


# --- variables: existence, values, deprecation, what an era reads ---------------------------------


@pytest.mark.parametrize("version", COVERED)
def test_env_knobs_exist_accept_and_deprecate_as_released(version: str) -> None:
    record = RELEASES[version]
    declared = set(record["envs"]["declared"])
    fp4 = record["envs"]["fp4"]
    auto_only = (linear(version).get("precedence") or {}).get(
        "env_read_only_when_linear_backend_auto"
    ) or {}
    e2k = linear(version).get("env_backend_to_kernel")
    e = era(version)
    for k in e.env_knobs():
        assert k.name in declared, f"{version}: {k.name} is a knob but vLLM does not declare it"
        spec = fp4[k.name]
        assert (k.deprecated is not None) == bool(spec.get("deprecated")), (version, k.name)
        if spec["kind"] == "bool(int())":
            assert k.type == "bool" and k.bool_style == "int", (version, k.name)
            assert set(k.accepted()) == {"1"}
            assert k.on_invalid is not None and "ValueError" in k.on_invalid
        else:
            assert spec["kind"] == "env_with_choices", (version, k.name, spec["kind"])
            assert k.type == "choice"
            assert set(k.accepted()) == set(spec["choices"]), version
            assert k.case_sensitive == spec["case_sensitive"]
            for value in spec["choices"]:
                # 0.20-0.23 map the value to a kernel class; before that the value is the name.
                want = KERNEL_BACKEND[e2k[value]] if e2k else value
                assert k.backend_for(value) == want, (version, value)
        if auto_only.get(k.name):
            assert k.note is not None and "only when --linear-backend is auto" in k.note
    for name in GEMM_ENV:
        if knob(e, name) is None and name in declared and record["env_read_by"].get(name):
            # Declared and read but not a knob: read for another purpose (compressed-tensors
            # only, or a side switch) and listed in `reads`, so the lint does not call it ignored.
            assert name in e.reads, f"{version}: {name} is read but neither knob nor in reads"


@pytest.mark.parametrize("version", COVERED)
def test_the_era_reads_what_the_release_reads(version: str) -> None:
    record = RELEASES[version]
    expected = {n for n in FILE_READ if record["env_read_by"].get(n)}
    selector_reads: set[str] = set()
    for selector in linear(version)["selectors"]:
        selector_reads |= set(selector["reads"])
    # VLLM_BATCH_INVARIANT is declared from 0.19 but read by the NVFP4 selection only from 0.20
    # (0.19 reads it in vllm/utils/flashinfer.py for other kernels): selector reads only.
    expected |= {n for n in SELECTOR_READ if n in selector_reads}
    assert era(version).read_variables() & set(TRACKED) == expected


@pytest.mark.parametrize("version", COVERED)
def test_knob_precedence(version: str) -> None:
    precedence = linear(version).get("precedence") or {}
    e = era(version)
    names = [k.name for k in e.knobs]
    tested = [
        "--linear-backend" if n == "linear_backend" else n
        for n in precedence.get("tested_in_order", [])
        if n != "use_a16"  # a W4A16 checkpoint: not a knob
    ]
    tested = [n for n in tested if n in names]
    ordered = [n for n in names if n in tested]
    if linear(version).get("fbgemm_quirk", {}).get("value"):
        # DOCUMENTED: 0.11.1-0.15.1 test VLLM_NVFP4_GEMM_BACKEND first and VLLM_USE_FBGEMM
        # inside its branch, so with both set FBGEMM wins: the profile lists FBGEMM first (as a
        # knob it never sets) because that is the effective precedence.
        assert tested == ["VLLM_NVFP4_GEMM_BACKEND", "VLLM_USE_FBGEMM"]
        assert ordered == ["VLLM_USE_FBGEMM", "VLLM_NVFP4_GEMM_BACKEND"]
        fbgemm = knob(e, "VLLM_USE_FBGEMM")
        assert fbgemm is not None and not fbgemm.select and fbgemm.note
        return
    assert ordered == tested


# --- --linear-backend ---------------------------------------------------------------------------


@pytest.mark.parametrize("version", COVERED)
def test_linear_backend_values_that_reach_an_nvfp4_kernel(version: str) -> None:
    flag = (RELEASES[version].get("cli") or {}).get("--linear-backend")
    cli = knob(era(version), "--linear-backend")
    if flag is None:
        assert cli is None
        return
    assert cli is not None and cli.kind == "cli"
    assert cli.case_sensitive is flag["case_sensitive"] is False
    kernels = set(registry(version) or [])
    mapping = linear(version)["linear_backend_to_kernels"]
    # vLLM filters _POSSIBLE_NVFP4_KERNELS by the flag: a value whose kernels are not in that
    # list finds nothing (0.22-0.27 raise; 0.28+ fall back to the automatic order with a
    # warning), so only values with a listed kernel select a backend.
    reach = {value: [k for k in ks if k in kernels] for value, ks in mapping.items()}
    reach = {value: ks for value, ks in reach.items() if ks}
    assert set(cli.accepted()) == set(reach), version
    assert set(reach) <= set(flag["choices"])
    for value, ks in reach.items():
        backends = {b for b, spellings in cli.values.items() if value in spellings}
        assert backends == {KERNEL_BACKEND[k] for k in ks}, (version, value)
        # The first backend listed for a shared spelling is what the lint reports; it must be
        # the first kernel vLLM tries for that value.
        assert cli.backend_for(value) == KERNEL_BACKEND[ks[0]], (version, value)
    unreachable = [v for v in mapping if v not in reach]
    if unreachable:
        behaviour = linear(version)["linear_backend_no_match"]["behaviour"]
        assert behaviour in ("raise", "fallback_to_auto_order")
        note = era(version).note or ""
        assert all(v in note for v in unreachable), (version, unreachable)
        assert ("raise" if behaviour == "raise" else "falls back") in note, version


# --- the automatic order ------------------------------------------------------------------------


def chain_order(version: str) -> list[str]:
    """The automatic order before the kernel registry: the literal backends the selection chain
    assigns on paths where no FP4 variable is set, in source order."""
    selectors = {s["function"]: s for s in linear(version)["selectors"]}
    chosen = (
        selectors.get("select_nvfp4_linear_backend")
        or selectors["ModelOptNvFp4LinearMethod.__init__"]
    )
    order: list[str] = []
    for sel in chosen["selections"]:
        if "set" not in sel or any(env_set(w) for w in sel["when"]):
            continue
        if sel["set"] == "self.use_marlin":  # 0.9.x: False is CUTLASS, True the fallback
            backend: str | None = "marlin" if sel["to"] == "True" else "cutlass"
        else:
            backend = CHAIN_BACKEND.get(sel["to"])
        if backend is not None and backend not in order:
            order.append(backend)
    return order


def env_set(condition: str) -> bool:
    """Whether a `when` condition holds only with some FP4 variable set."""
    negated = condition.startswith("not (") and condition.endswith(")")
    inner = condition[5:-1] if negated else condition
    if "envs." not in inner:
        return False
    return inner.endswith(" is None") == negated


@pytest.mark.parametrize("version", COVERED)
def test_automatic_order(version: str) -> None:
    e = era(version)
    got = [s.backend for s in e.auto]
    kernels = registry(version)
    if kernels is None:
        assert got == chain_order(version)
        return
    expected = [KERNEL_BACKEND[k] for k in kernels]
    if "prefers_humming" in linear(version)["helpers"]:
        # 0.32+: prioritize_humming moves Humming just ahead of Marlin where prefers_humming()
        # holds; the profile writes that as a second, CC-bound Humming step before Marlin.
        early = got.index("humming")
        assert got[early + 1] == "marlin" and got.count("humming") == 2
        prefers = linear(version)["helpers"]["prefers_humming"]["accepts_cc"]
        for cc in CCS:
            held = conditions_hold(e.auto[early].conditions, judged(version, cc).context)
            assert held == prefers[str(cc)], (version, cc)
        got.pop(early)
    assert got == expected


# --- compute-capability gates -------------------------------------------------------------------


def gates(version: str) -> dict[str, dict[str, bool | None]]:
    """backend -> the data's verdict per CC, for every kernel of the automatic order (0.20+), or
    the helpers the selection chain calls (before)."""
    lin = linear(version)
    kernels = registry(version)
    if kernels is not None:
        return {KERNEL_BACKEND[k]: lin["kernels"][k]["gate"]["accepts_cc"] for k in kernels}
    out = {"cutlass": lin["helpers"]["cutlass_fp4_supported"]["accepts_cc"]}
    out["marlin"] = lin["helpers"]["is_fp4_marlin_supported"]["accepts_cc"]
    return out


GATE_CASES = [(v, cc) for v in COVERED for cc in CCS]


@pytest.mark.parametrize(("version", "cc"), GATE_CASES)
def test_compute_capability_gates(version: str, cc: int) -> None:
    ev = judged(version, cc)
    e = era(version)
    for backend, verdicts in gates(version).items():
        accepted = verdicts[str(cc)]
        step = general_step(e, backend)
        in_order = conditions_hold(step, ev.context)
        where = (version, cc, backend)
        if accepted is None:
            # DOCUMENTED: the gate rests on cutlass_scaled_mm_supports_fp4, compiled code the
            # extraction cannot evaluate. The profile states it once (cutlass_fp4_supported:
            # 100 <= cc < 130 from 0.10.1, the SM10x family before: PR #21309) and uses that
            # condition both for the backend and in the automatic order.
            assert uses(step, "cutlass_fp4_supported"), where
            assert uses(VLLM.backends[backend].requires, "cutlass_fp4_supported") or (
                backend == "flashinfer-cutlass"  # FlashInfer's own CUTLASS table is finer
            ), where
            top = 130 if Version(version) >= Version("0.10.1") else 110
            assert in_order == (100 <= cc < top), where
            continue
        assert in_order == accepted, where
        if not accepted:
            assert not ev.valid(backend), where
        elif backend == "fbgemm" and cc < 100:
            # DOCUMENTED: vLLM checks only has_fbgemm_gpu(); the profile keeps FBGEMM's own
            # Blackwell floor for f4f4bf16 (its reason says the boundary is not verified).
            rule = next(r for r in VLLM.backends["fbgemm"].requires if r.per_gpu)
            assert rule.reason is not None and "boundary not verified" in rule.reason
            assert not engine_accepts(backend, ev), where
        else:
            assert engine_accepts(backend, ev), where


def cc_finding_passes(version: str, cc: int, backend: str) -> bool:
    ev = judged(version, cc)
    found = [
        f.status.blocking
        for f in ev.verdicts[backend].findings
        if f.id.startswith(f"backend.{backend}.compute_capability")
    ]
    assert found, (version, cc, backend)
    return not any(found)


def test_vllm_cutlass_is_sm10x_only_before_0_10_1() -> None:
    # PR #21309 (CUTLASS NVFP4 for SM120) was merged after v0.10.0: an RTX 5090 on 0.10.0 has
    # no native vLLM CUTLASS path; from 0.10.1 the compute capability is accepted.
    assert not cc_finding_passes("0.10.0", 120, "cutlass")
    assert cc_finding_passes("0.10.1", 120, "cutlass")
    assert cc_finding_passes("0.10.0", 100, "cutlass")


# --- has_flashinfer() -----------------------------------------------------------------------------

HAS_FLASHINFER = [v for v in COVERED if RELEASES[v]["has_flashinfer"] is not None]


def has_flashinfer_holds(version: str, host: HostFacts) -> bool:
    ev = evaluate(VLLM, host, override_version=version)
    use = next(
        r
        for r in VLLM.backends["flashinfer-cudnn"].requires
        if isinstance(r.kind, Use) and r.kind.name == "has_flashinfer"
    )
    return conditions_hold((use,), ev.context)


@pytest.mark.parametrize("version", HAS_FLASHINFER)
def test_has_flashinfer_needs_what_the_release_checks(version: str) -> None:
    checks = RELEASES[version]["has_flashinfer"]["checks"]
    assert checks["flashinfer_importable"]
    kernel_checks = checks["flashinfer_cubin"] or checks["nvcc"]
    assert has_flashinfer_holds(version, flashinfer_only_host()) is not kernel_checks
    with_cubin_env = flashinfer_only_host(VLLM_HAS_FLASHINFER_CUBIN="1")
    assert has_flashinfer_holds(version, with_cubin_env) is (
        not kernel_checks or checks["env_VLLM_HAS_FLASHINFER_CUBIN"]
    )
    nvcc_only = dataclasses.replace(
        flashinfer_only_host(),
        toolchain=dataclasses.replace(BASE.toolchain, ninja_path=None),
    )
    nvcc_is_enough = checks["nvcc"] and not checks["ninja"]
    assert has_flashinfer_holds(version, nvcc_only) is (not kernel_checks or nvcc_is_enough)


@pytest.mark.parametrize("version", HAS_FLASHINFER)
def test_a_failing_flashinfer_import_is_not_absence(version: str) -> None:
    # has_flashinfer() asks importlib.util.find_spec('flashinfer'): it never imports FlashInfer,
    # so an `import flashinfer` that raises (flashinfer-cubin at another version) leaves vLLM
    # picking a FlashInfer kernel, which then crashes. The automatic order must not treat the
    # import check as absence; the backends carry it, so the report says the pick cannot run.
    returns = RELEASES[version]["has_flashinfer"]["returns"]
    text = " ".join([r["return"] for r in returns] + [w for r in returns for w in r["when"]])
    assert "find_spec('flashinfer')" in text and "import flashinfer" not in text
    e = era(version)
    for step in e.auto:
        assert not uses(step.conditions, "flashinfer_import"), (version, step.backend)
        if uses(step.conditions, "has_flashinfer"):
            assert uses(VLLM.backends[step.backend].requires, "flashinfer_import")
    fi_steps = [s.backend for s in e.auto if uses(s.conditions, "has_flashinfer")]
    if not fi_steps:
        return
    # FlashInfer 0.7.0-0.7.1 still raise on a flashinfer-cubin at another version (0.7.2 on
    # logs and ignores it: flashinfer/env.py of each wheel).
    versions = {
        **rich_host(100).packages.versions,
        "flashinfer-python": "0.7.1",
        "flashinfer-cubin": "0.6.1",
    }
    broken = dataclasses.replace(
        rich_host(100), packages=dataclasses.replace(rich_host(100).packages, versions=versions)
    )
    ev = evaluate(VLLM, broken, override_version=version)
    assert engine_auto(ev) in fi_steps, (version, ev.auto_order)
    assert not ev.valid(engine_auto(ev))


def test_no_flashinfer_step_before_vllm_uses_it() -> None:
    for version in COVERED:
        if RELEASES[version]["has_flashinfer"] is None or Version(version) < Version("0.10.1"):
            steps = era(version).auto
            assert not any(uses(s.conditions, "has_flashinfer") for s in steps), version


# --- the W4A16 kernels are weight-only ---------------------------------------------------------


def test_weight_only_kernels_are_not_native() -> None:
    for backend in ("marlin", "humming", "flashinfer-cutedsl-w4a16", "b12x-w4a16", "emulation"):
        assert not VLLM.backends[backend].native, backend
    for backend in ("torch", "cutlass", "flashinfer-cutedsl", "b12x"):
        assert VLLM.backends[backend].native, backend


def test_w4a16_cutedsl_gate_is_read_from_the_wheel() -> None:
    # The extraction evaluates FlashInferCuteDslNvFp4W4A16LinearKernel.is_supported; the
    # profile's any_of of [100, 103] and 12.x says the same.
    for version in ("0.30.0", "0.33.0"):
        gate = linear(version)["kernels"]["FlashInferCuteDslNvFp4W4A16LinearKernel"]["gate"]
        rule = next(
            r
            for r in VLLM.backends["flashinfer-cutedsl-w4a16"].requires
            if r.id == "compute_capability"
        )
        assert isinstance(rule.kind, AnyOf)
        assert all(isinstance(c.kind, ComputeCapability) for c in rule.children)
        for cc in CCS:
            ev = judged(version, cc)
            assert rule.check(ev.context, ev.facts.gpus[0]).ok == gate["accepts_cc"][str(cc)]


@pytest.mark.parametrize("version", COVERED)
def test_removed_variables_are_errors_where_the_release_refuses_them(version: str) -> None:
    removed = (RELEASES[version]["envs"].get("removed") or {}).get("names", {})
    ours = {
        name
        for name, variable in VLLM.variables.items()
        if variable.removed is not None and variable.removed.contains(version)
    }
    assert ours == set(removed), version


def test_0_34_batch_invariant_is_read_through_its_tuple_assignment() -> None:
    # 0.34 writes `force_kernel, bi_backend = HummingNvFp4LinearKernel, "humming"`: the
    # extraction must still see VLLM_BATCH_INVARIANT ahead of --linear-backend.
    precedence = linear("0.34.0")["precedence"]
    assert precedence["tested_in_order"][0] == "VLLM_BATCH_INVARIANT"
    sets = [s for s in linear("0.34.0")["selectors"][-1]["selections"] if "set" in s]
    assert any(s["to"] == "HummingNvFp4LinearKernel" for s in sets)


# --- shape rules (profiles/shapes.yaml) from every release's raises -----------------------------

# shapes.yaml alignment id -> the raise (tools/extract/data/vllm.json `shape_guards`) it states.
SHAPE_RAISES = {
    "vllm_modelopt_k16": "in features size is not multiple of 16",
    "vllm_fi_cutlass_moe_gated_intermediate": "Intermediate size padding for w1 and w3",
}


@pytest.mark.parametrize("rule", sorted(SHAPE_RAISES))
def test_shape_rules_hold_where_the_release_raises(rule: str) -> None:
    alignment = next(a for a in constraints.load().alignments if a.id == rule)
    raising = [
        v
        for v in DATA["covers"]
        if any(SHAPE_RAISES[rule] in g["raise"] for g in RELEASES[v]["shape_guards"])
    ]
    stated = [v for v in DATA["covers"] if alignment.engine.contains(v, prereleases=True)]
    assert stated == raising, (rule, raising[0], raising[-1])


# --- what vLLM's own code did when asked (docs/engine-oracle.md, tools/engine_agreement.py) ----


def _without_flashinfer(cc: int) -> HostFacts:
    host = rich_host(cc)
    kept = {k: v for k, v in host.packages.versions.items() if not k.startswith("flashinfer")}
    return dataclasses.replace(host, packages=dataclasses.replace(host.packages, versions=kept))


@pytest.mark.parametrize("version", ["0.17.0", "0.18.0", "0.19.1", "0.20.0"])
@pytest.mark.parametrize("cc", [90, 100, 120])
def test_vllm_0_17_to_0_19_without_flashinfer_stops_in_moe_selection(version: str, cc: int) -> None:
    # trtllm_nvfp4_moe.py imports flashinfer at top level in 0.17.0-0.19.1 and the automatic
    # order imports it first: ModuleNotFoundError on every GPU (vLLM 0.18.0 asked for CC 9.0-12.1).
    ev = evaluate(VLLM, _without_flashinfer(cc), override_version=version, family="moe")
    if Version(version) >= Version("0.20"):
        assert engine_auto(ev) != "flashinfer-trtllm-moe" and ev.valid(str(engine_auto(ev)))
        return
    assert engine_auto(ev) == "flashinfer-trtllm-moe" and not ev.valid("flashinfer-trtllm-moe")
    reasons = [p.reason for p in ev.verdicts["flashinfer-trtllm-moe"].problems()]
    assert any("ModuleNotFoundError" in r for r in reasons), reasons


@pytest.mark.parametrize("version", ["0.30.0", "0.33.0", "0.34.0"])
def test_the_w4a16_cutedsl_knob_disables_the_w4a4_kernel(version: str) -> None:
    # --linear-backend=flashinfer_cutedsl names both CuTe-DSL kernels, W4A4 first; vLLM 0.33.0
    # and 0.34.0 ran the W4A16 one only with VLLM_DISABLED_KERNELS naming the W4A4 one.
    from fp4doctor.selection.choice import resolve

    ev = evaluate(VLLM, rich_host(100), override_version=version)
    w4a16 = resolve(ev, prefer="flashinfer-cutedsl-w4a16")
    assert w4a16.cli_args == (("--linear-backend", "flashinfer_cutedsl"),)
    assert w4a16.set_env == (("VLLM_DISABLED_KERNELS", "FlashInferCuteDslNvFp4LinearKernel"),)
    assert resolve(ev, prefer="flashinfer-cutedsl").set_env == ()
