"""The MoE family of the shipped profiles against the program-extracted release data.

tools/extract/data/{vllm,sglang,flashinfer}.json hold what tools/extract/*.py read from every
released wheel; the `moe` field of each release (fields: tools/extract/README.md) is what this
module checks the profiles' MoE family against, release by release: vLLM's MoE variables (which
exist, what they accept, which are deprecated), `--moe-backend` and its values, the NVFP4 MoE
oracle's automatic order and each experts class's compute-capability gate; SGLang's
`--moe-runner-backend` values and its Blackwell gate; FlashInfer's fused-MoE entry points per
release. Where the profile is deliberately coarser or finer than the data, the test says so in
place (`DOCUMENTED`), never by skipping.
"""

from __future__ import annotations

import dataclasses
import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from packaging.version import Version

from fp4doctor import facts, profile
from fp4doctor.facts import Gpu, HostFacts
from fp4doctor.profile.kinds.base import Requirement
from fp4doctor.profile.kinds.use import Use
from fp4doctor.profile.model import Era, Knob
from fp4doctor.rules import EngineVersion, Evaluation, era_for, evaluate
from fp4doctor.rules.backends import conditions_hold
from fp4doctor.versions import bounds, contains, release_of

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tools" / "extract" / "data"
VLLM_DATA: dict[str, Any] = json.loads((DATA / "vllm.json").read_text(encoding="utf-8"))
SGLANG_DATA: dict[str, Any] = json.loads((DATA / "sglang.json").read_text(encoding="utf-8"))
FI_DATA: dict[str, Any] = json.loads((DATA / "flashinfer.json").read_text(encoding="utf-8"))
VLLM = profile.load("vllm")
SGLANG = profile.load("sglang")
FLASHINFER = profile.load("flashinfer")
BASE = facts.load(Path(__file__).parent / "fixtures" / "hosts" / "b200.json")
CCS = (75, 80, 90, 100, 103, 107, 110, 120, 121)


def covered(data: dict[str, Any], prof: profile.Profile) -> list[str]:
    first = bounds(prof.eras[0].versions)[0]
    assert first is not None
    return [v for v in data["covers"] if release_of(v) >= first and v in data["releases"]]


VLLM_RELEASES = covered(VLLM_DATA, VLLM)
SGLANG_RELEASES = covered(SGLANG_DATA, SGLANG)
MOE_VARIABLES = ("VLLM_USE_FLASHINFER_MOE_FP4", "VLLM_FLASHINFER_MOE_BACKEND")
# vLLM's NvFp4MoeBackend members and the profile backend each one is. FLASHINFER_CUTEDSL_BATCHED
# is the same CuTe-DSL experts for the batched activation layout (one backend here: DOCUMENTED).
ENUM_BACKEND = {
    "FLASHINFER_TRTLLM": "flashinfer-trtllm-moe",
    "FLASHINFER_CUTEDSL": "flashinfer-cutedsl-moe",
    "FLASHINFER_CUTEDSL_BATCHED": "flashinfer-cutedsl-moe",
    "FLASHINFER_CUTLASS": "flashinfer-cutlass-moe",
    "VLLM_CUTLASS": "cutlass-moe",
    "MARLIN": "marlin-moe",
    "HUMMING": "humming-moe",
    "EMULATION": "emulation-moe",
    "FLASHINFER_B12X": "flashinfer-b12x-moe",
    "B12X": "b12x-moe",
}
# The --moe-backend values and the NvFp4MoeBackend member vLLM's map_nvfp4_backend maps each
# to (oracle/nvfp4.py; 'humming' and 'b12x' are not in the extracted data: DOCUMENTED in the
# profile as unverified).
MOE_BACKEND_VALUE = {
    "cutlass": "cutlass-moe",
    "flashinfer_trtllm": "flashinfer-trtllm-moe",
    "flashinfer_cutlass": "flashinfer-cutlass-moe",
    "flashinfer_cutedsl": "flashinfer-cutedsl-moe",
    "flashinfer_b12x": "flashinfer-b12x-moe",
    "b12x": "b12x-moe",
    "marlin": "marlin-moe",
    "humming": "humming-moe",
    "emulation": "emulation-moe",
}


def moe_era(prof: profile.Profile, version: str) -> Era:
    era, engine = era_for(prof.view("moe"), EngineVersion(version, "--engine-version"))
    assert engine.covered, version
    return era


def knob(e: Era, name: str) -> Knob | None:
    return next((k for k in e.knobs if k.name == name), None)


@cache
def rich_host(cc: int) -> HostFacts:
    """One GPU of `cc` with every package any MoE backend could want, so that what is left to
    decide is the compute capability."""
    gpu = Gpu(0, f"synthetic SM{cc}", cc // 10, cc % 10, 80000)
    versions = {
        "torch": "2.9.1",
        "flashinfer-python": "0.7.4",
        "flashinfer-cubin": "0.7.4",
        "nvidia-cutlass-dsl": "4.3.4",
        "b12x": "0.1.0",
        "humming-kernels": "0.1.0",
        "sgl-kernel": "0.3.20",
    }
    packages = dataclasses.replace(BASE.packages, versions=versions, torch_cuda="13.0")
    toolchain = dataclasses.replace(BASE.toolchain, nvcc_version="13.0")
    return dataclasses.replace(BASE, gpus=[gpu], packages=packages, toolchain=toolchain, env={})


@cache
def judged(target: str, version: str, cc: int) -> Evaluation:
    prof = {"vllm": VLLM, "sglang": SGLANG, "flashinfer": FLASHINFER}[target]
    return evaluate(prof, rich_host(cc), override_version=version, family="moe")


def engine_cc_rules(reqs: tuple[Requirement, ...], own: set[str]) -> list[Requirement]:
    """The compute-capability rules of the engine itself: conditions named in `own` expanded,
    FlashInfer's module conditions left out."""
    out: list[Requirement] = []
    for req in reqs:
        if isinstance(req.kind, Use):
            if req.kind.name in own:
                out += engine_cc_rules(req.children, own)
        elif req.per_gpu:
            out.append(req)
    return out


def engine_accepts(target: str, backend: str, version: str, cc: int, own: set[str]) -> bool:
    ev = judged(target, version, cc)
    reqs = ev.profile.backends[backend].requires
    rules = [r for r in engine_cc_rules(reqs, own) if r.applies(ev.context)]
    return all(r.check(ev.context, ev.facts.gpus[0]).ok for r in rules)


# --- vLLM ---------------------------------------------------------------------------------------


def test_every_vllm_release_is_judged_by_an_era_with_a_moe_family() -> None:
    assert VLLM_RELEASES
    for version in VLLM_RELEASES:
        assert moe_era(VLLM, version).auto, version


@pytest.mark.parametrize("version", VLLM_RELEASES)
def test_moe_variables_exist_accept_and_deprecate_as_released(version: str) -> None:
    fp4 = VLLM_DATA["releases"][version]["envs"].get("fp4", {})
    era = moe_era(VLLM, version)
    for name in MOE_VARIABLES:
        k = knob(era, name)
        released = fp4.get(name)
        assert (k is not None) == (released is not None), (version, name)
        if k is None or released is None:
            # Gone from envs.py: vLLM warns it is unknown and ignores it; the profile says so.
            assert name in VLLM.variables and VLLM.variables[name].family == "moe"
            continue
        assert (k.deprecated is not None) == ("deprecated" in released), (version, name)
        if released.get("choices"):
            assert sorted(k.accepted()) == sorted(released["choices"]), (version, name)
        if released.get("kind") == "bool(int())":
            assert (k.type, k.bool_style) == ("bool", "int"), (version, name)


@pytest.mark.parametrize("version", VLLM_RELEASES)
def test_moe_backend_flag_and_its_values(version: str) -> None:
    cli = VLLM_DATA["releases"][version]["cli"].get("--moe-backend")
    k = knob(moe_era(VLLM, version), "--moe-backend")
    assert (k is not None) == (cli is not None), version
    if k is None or cli is None:
        return
    assert not k.case_sensitive and cli["case_sensitive"] is False
    for backend, spellings in k.values.items():
        for value in spellings:
            assert value in cli["choices"], (version, value)
            assert MOE_BACKEND_VALUE[value] == backend, (version, value)
    # The flag is read before the variables (select_nvfp4_moe_backend: runner_backend first).
    assert moe_era(VLLM, version).knobs[0] is k


@pytest.mark.parametrize("version", VLLM_RELEASES)
def test_moe_automatic_order(version: str) -> None:
    moe = VLLM_DATA["releases"][version]["moe"]
    era = moe_era(VLLM, version)
    profile_order = list(dict.fromkeys(s.backend for s in era.auto))
    order = moe.get("auto_order")
    if not order:
        # Before the oracle (0.15): CUTLASS experts when cutlass_fp4_supported, else Marlin;
        # FlashInfer only through VLLM_USE_FLASHINFER_MOE_FP4.
        assert profile_order == ["cutlass-moe", "marlin-moe"], version
        return
    expected = list(dict.fromkeys(ENUM_BACKEND[o.split(".")[-1]] for o in order))
    if moe.get("auto_order_reordered_by"):
        # prioritize_humming moves Humming ahead of Marlin on SM90 only: the profile's first
        # Humming step is that move (DOCUMENTED); the general order is the data's.
        steps = [s.backend for s in era.auto]
        first = steps.index("humming-moe")
        assert era.auto[first].conditions, version
        general = steps[:first] + steps[first + 1 :]
        profile_order = list(dict.fromkeys(general))
    assert profile_order == expected, version


def _data_accepts(version: str, enum: str, cc: int) -> bool | None:
    experts = VLLM_DATA["releases"][version]["moe"].get("experts") or {}
    classes = experts.get(f"NvFp4MoeBackend.{enum}")
    if not classes:
        return None
    gates = [c["gate"]["accepts_cc"] for c in classes if c.get("gate") and c["gate"]["accepts_cc"]]
    if not gates:
        return None
    return any(g.get(str(cc), False) for g in gates)


GATE_CASES = [
    (v, cc) for v in VLLM_RELEASES if VLLM_DATA["releases"][v]["moe"].get("experts") for cc in CCS
]
OWN_VLLM = {"cutlass_fp4_supported", "native_cuda"}


@pytest.mark.parametrize(("version", "cc"), GATE_CASES)
def test_moe_compute_capability_gates(version: str, cc: int) -> None:
    for enum, backend in ENUM_BACKEND.items():
        data = _data_accepts(version, enum, cc)
        if data is None:
            # DOCUMENTED: TRTLLM has no experts class in 0.15-0.16 and EMULATION no gate in
            # 0.20; the profile states [100, 103] and "any CUDA GPU" there (unverified).
            assert (enum, release_of(version) < Version("0.21")) in {
                ("FLASHINFER_TRTLLM", True),
                ("EMULATION", True),
            } or enum not in {
                o.split(".")[-1]
                for o in VLLM_DATA["releases"][version]["moe"].get("backends_enum") or {}
            }, (version, enum)
            continue
        if backend not in VLLM.backends:
            continue
        ours = engine_accepts("vllm", backend, version, cc, OWN_VLLM)
        if enum == "FLASHINFER_CUTLASS":
            # DOCUMENTED: the device gate admits SM90 for FP8/MXFP4; NVFP4 W4A4 needs
            # _supports_quant_scheme too (family 100 in 0.15.0: every 10.x;
            # has_device_capability(100) from 0.15.1; read in the wheels, not in the extracted
            # data).
            data = data and (100 <= cc < 110 if version == "0.15.0" else cc >= 100)
        assert ours == data, (version, backend, cc)


@pytest.mark.parametrize("version", [v for v in VLLM_RELEASES if release_of(v) < Version("0.15")])
def test_flashinfer_moe_gates_before_the_oracle(version: str) -> None:
    functions = VLLM_DATA["releases"][version]["moe"].get("functions", {})
    for function, backend in (
        ("is_flashinfer_fp4_cutlass_moe_available", "flashinfer-cutlass-moe"),
        ("is_flashinfer_fp4_cutedsl_moe_available", "flashinfer-cutedsl-moe"),
    ):
        gate = (functions.get(function) or {}).get("gate") or {}
        accepts = gate.get("accepts_cc")
        if not accepts:
            continue
        for cc in CCS:
            ours = engine_accepts("vllm", backend, version, cc, OWN_VLLM)
            assert ours == accepts[str(cc)], (version, backend, cc)


def test_the_moe_variables_vllm_ignores_are_linted() -> None:
    env = {"VLLM_USE_FLASHINFER_MOE_FP4": "1", "VLLM_FLASHINFER_MOE_BACKEND": "latency"}
    newest = VLLM_RELEASES[-1]
    ev = evaluate(VLLM, rich_host(100), env=env, override_version=newest, family="moe")
    ids = {f.id: f for f in ev.env_findings}
    for name in MOE_VARIABLES:
        assert ids[f"env.{name}"].status.value == "warn"
        assert "ignores" in ids[f"env.{name}"].reason
    linear = evaluate(VLLM, rich_host(100), env=env, override_version=newest)
    assert not linear.env_findings  # the linear family leaves them to their own family


# --- SGLang -------------------------------------------------------------------------------------

SGLANG_VALUE = {
    "flashinfer_trtllm": "flashinfer-trtllm-moe",
    "flashinfer_cutlass": "flashinfer-cutlass-moe",
    "flashinfer_cutedsl": "flashinfer-cutedsl-moe",
    "cutlass": "sgl-cutlass-moe",
    "marlin": "marlin-moe",
}


@pytest.mark.parametrize("version", SGLANG_RELEASES)
def test_sglang_moe_runner_backend_values(version: str) -> None:
    moe = SGLANG_DATA["releases"][version]["moe"]
    flag = moe.get("moe_runner_backend_flag")
    k = knob(moe_era(SGLANG, version), "--moe-runner-backend")
    assert (k is not None) == (flag is not None), version
    if k is None or flag is None:
        return
    choices = flag["choices"]["values"]
    for backend, spellings in k.values.items():
        for value in spellings:
            assert value in choices, (version, value)
            assert SGLANG_VALUE[value] == backend
    # DOCUMENTED coarser: flashinfer_cutedsl from 0.5.3rc2 (the 0.5.3rc0 wheel has it), cutlass
    # from 0.5.4 (0.5.3.post2); marlin from 0.5.12; cutlass refused for NVFP4 from 0.5.16.
    missing = {SGLANG_VALUE[c] for c in choices if c in SGLANG_VALUE} - set(k.values)
    allowed = set()
    if release_of(version) < Version("0.5.4"):
        allowed |= {"flashinfer-cutedsl-moe", "sgl-cutlass-moe"}
    if release_of(version) >= Version("0.5.16"):
        allowed |= {"sgl-cutlass-moe"}
    assert missing <= allowed, (version, missing)


@pytest.mark.parametrize("version", SGLANG_RELEASES)
def test_sglang_blackwell_gate(version: str) -> None:
    method = SGLANG_DATA["releases"][version]["moe"]["nvfp4_moe_methods"].get(
        "sglang/srt/layers/quantization/modelopt_quant.py::ModelOptNvFp4FusedMoEMethod"
    )
    assert method is not None, version
    raises = " ".join(" ".join(r["when"]) for r in method["raises"] if r["in"] == "__init__")
    sm100_only = "is_sm100_supported" in raises
    own = set(_sg_own())
    assert engine_accepts("sglang", "flashinfer-cutlass-moe", version, 120, own) == (
        not sm100_only
    ), (version, raises)
    # is_blackwell_supported: majors 10 and 12, and 11 (Thor) from 0.5.9 (utils/common.py)
    thor = engine_accepts("sglang", "flashinfer-cutlass-moe", version, 110, own)
    assert thor == (release_of(version) >= Version("0.5.9")), version
    assert not engine_accepts("sglang", "flashinfer-cutlass-moe", version, 90, own)


def _sg_own() -> list[str]:
    return ["sglang_moe_blackwell_gate", "native_cuda"]


# The platform predicates SGLang's server-args post-processing tests, and the CC majors each
# one means (sglang/srt/utils/common.py: _check_cuda_device_version(majors, CUDA 12.8)).
_SG_PREDICATE_MAJORS = {"is_sm120": 12, "is_sm110": 11, "is_sm100": 10}
# Where the releases resolve --moe-runner-backend for every model: ServerArgs's method
# (0.5.13-0.5.14), then a post-process pass of sglang/srt/arg_groups/overrides.py (0.5.15+).
_SG_POST_PROCESSING = ("_handle_moe_kernel_config", "_moe_runner_backend_quant_constraints")


def _post_processing_majors(version: str) -> set[int]:
    """The CC majors on which the release's own post-processing moves `auto` to
    flashinfer_cutlass for --quantization modelopt_fp4, read from its arg files."""
    majors: set[int] = set()
    for rewrite in SGLANG_DATA["releases"][version]["moe"]["fp4_rewrites_of_moe_runner_backend"]:
        when = " and ".join(rewrite["when"])
        if rewrite["value"] != "flashinfer_cutlass" or "quantization == 'modelopt_fp4'" not in when:
            continue
        if rewrite["function"] not in _SG_POST_PROCESSING or "auto'" not in when:
            continue  # a per-model override (DeepSeek, Nemotron-H...), judged with its model
        majors |= {m for name, m in _SG_PREDICATE_MAJORS.items() if name in when}
    return majors


def _auto_head(version: str, cc: int, args: dict[str, str]) -> str | None:
    """The first step of the release's MoE automatic order that holds at `cc` with the engine
    flags `args` (the context's `args`, as the engine's command line sets them)."""
    ctx = dataclasses.replace(judged("sglang", version, cc).context)
    object.__setattr__(ctx, "args", args)  # the command line, as Context.args carries it
    era = moe_era(SGLANG, version)
    return next((step.backend for step in era.auto if conditions_hold(step.conditions, ctx)), None)


@pytest.mark.parametrize("version", SGLANG_RELEASES)
def test_sglang_post_processing_moves_auto_to_flashinfer_cutlass(version: str) -> None:
    """SGLang's own server-args post-processing (ServerArgs._handle_moe_kernel_config, then
    arg_groups/overrides.py _moe_runner_backend_quant_constraints) moves --moe-runner-backend
    auto to flashinfer_cutlass on SM12x (and SM11x from 0.5.22) when --quantization
    modelopt_fp4 is given; the profile's automatic order says the same, release by release."""
    majors = _post_processing_majors(version)
    if release_of(version) >= Version("0.5.13"):
        assert 12 in majors, version
    quant = {"--quantization": "modelopt_fp4"}
    for cc in (100, 110, 120, 121):
        with_flag = _auto_head(version, cc, quant)
        without = _auto_head(version, cc, {})
        assert without != "flashinfer-cutlass-moe" or release_of(version) < Version("0.5.11"), (
            version,
            cc,
        )
        if cc // 10 in majors:
            assert with_flag == "flashinfer-cutlass-moe", (version, cc, with_flag)
        else:
            assert with_flag == without, (version, cc, with_flag, without)


# --- FlashInfer ---------------------------------------------------------------------------------


def _fi_expected(entry: dict[str, Any]) -> set[int]:
    """The NVFP4-capable GPUs of an entry point as the wheel states them: its gate, else the
    GPUs its launcher compiles for, narrowed by the kernels the launcher can dispatch to."""
    if entry.get("cc"):
        return {int(c) for c in entry["cc"]}
    dispatch = entry.get("arch_dispatch") or {}
    if dispatch:
        return {int(c) for c in dispatch if int(c) >= 100}  # SM89/SM90 modules: no NVFP4
    majors = entry["jit"]["supported_major_versions"]
    if majors:
        launcher = {c for c in (100, 103, 107, 110, 120, 121) if c // 10 in majors}
        return launcher & _cubin_runs_on(entry.get("cubin_archs"))
    return {100} if "sm_100a" in entry["jit"]["archs"] else set()


def _cubin_runs_on(cubins: dict[str, Any] | None) -> set[int]:
    """The GPUs the trtllm-gen cubins run on: the runner's own `isArchCompatible` where the
    release has it; before it, every cubin of the manifest is an Sm10x one (the only
    architectures the trtllm-gen enum the runner names has: Sm100a, Sm100f, Sm103a)."""
    every = {100, 103, 107, 110, 120, 121}
    if cubins is None:
        return every
    accepts = cubins.get("runner_accepts")
    if accepts:
        return {int(sm) for sms in accepts.values() for sm in sms}
    return {100, 103, 107}


FI_ENTRY = {
    "trtllm_fp4_block_scale_moe": "flashinfer-trtllm-moe",
    "cutlass_fused_moe": "flashinfer-cutlass-moe",
    "cute_dsl_fused_moe_nvfp4": "flashinfer-cutedsl-moe",
}
FI_CASES = [
    (v, entry)
    for v, rel in FI_DATA["releases"].items()
    for entry in FI_ENTRY
    if (rel.get("moe") or {}).get(entry)
]


@pytest.mark.parametrize(("version", "entry"), FI_CASES)
def test_flashinfer_moe_gates_per_release(version: str, entry: str) -> None:
    data = FI_DATA["releases"][version]["moe"][entry]
    expected = _fi_expected(data) & {100, 103, 107, 110, 120, 121}
    backend = FLASHINFER.backends[FI_ENTRY[entry]]
    gate = next(r for r in backend.requires if r.id == "compute_capability")
    host = rich_host(100)
    versions = {**host.packages.versions, "flashinfer-python": version}
    ctx_host = dataclasses.replace(
        host, packages=dataclasses.replace(host.packages, versions=versions)
    )
    ev = evaluate(FLASHINFER, ctx_host, override_version=version, family="moe")
    rules = [c for c in gate.children if c.applies(ev.context)]
    assert rules, (version, entry)
    ours = set()
    for cc in (100, 103, 107, 110, 120, 121):
        gpu = Gpu(0, "x", cc // 10, cc % 10, 1)
        if all(r.check(ev.context, gpu).ok for r in rules):
            ours.add(cc)
    if entry == "cutlass_fused_moe" and Version(version) < Version("0.4.0rc0") and expected:
        # DOCUMENTED: 0.3.x dispatches 121 and 122 but not 120; the profile states SM120 for
        # the whole 0.3.1-0.6.15 range (unverified there).
        assert ours - expected <= {120} and expected - ours <= {122}, version
        return
    if entry == "cute_dsl_fused_moe_nvfp4" and not data.get("cc"):
        # DOCUMENTED: 0.6.4-0.6.6 carry no decorator; the profile states [100, 103].
        assert ours == {100, 103}
        return
    assert ours == expected, (version, entry)


TRTLLM_CUBINS = [
    (v, rel["moe"]["trtllm_fp4_block_scale_moe"]["cubin_archs"])
    for v, rel in FI_DATA["releases"].items()
    if ((rel.get("moe") or {}).get("trtllm_fp4_block_scale_moe") or {}).get("cubin_archs")
]


@pytest.mark.parametrize(("version", "cubins"), TRTLLM_CUBINS)
def test_trtllm_moe_cubins_run_on_sm10x_only(version: str, cubins: dict[str, Any]) -> None:
    """A launcher's compile list is not a kernel list (issue 40): whatever GPUs the TRT-LLM MoE
    launcher compiles for, the cubins each release declares and its runner accepts are SM10x
    ones, so the profile never admits SM11x or SM12x for flashinfer-trtllm-moe."""
    declared = cubins.get("declared") or {}
    for names in declared.values():
        assert names and all(n.startswith("Sm10") for n in names), (version, declared)
    accepts = cubins.get("runner_accepts") or {}
    if declared and accepts:
        named = {n for names in declared.values() for n in names}
        assert named == set(accepts), (version, named, accepts)  # "Mirrors isArchCompatible()"
    for sms in accepts.values():
        assert all(sm // 10 == 10 for sm in sms), (version, accepts)
    for line in cubins.get("runner_filters") or []:
        assert "Sm11" not in line and "Sm12" not in line, (version, line)
    if Version(version) >= Version("0.6.7"):
        for cc in (110, 120, 121):
            host = rich_host(cc)
            versions = {**host.packages.versions, "flashinfer-python": version}
            host = dataclasses.replace(
                host, packages=dataclasses.replace(host.packages, versions=versions)
            )
            ev = evaluate(FLASHINFER, host, override_version=version, family="moe")
            assert not ev.verdicts["flashinfer-trtllm-moe"].valid, (version, cc)


def test_flashinfer_entry_points_exist_from_the_release_the_profile_names() -> None:
    first = {}
    for version in sorted(FI_DATA["releases"], key=Version):
        for entry in FI_ENTRY:
            if (FI_DATA["releases"][version].get("moe") or {}).get(entry) and entry not in first:
                first[entry] = version
    for entry, backend in FI_ENTRY.items():
        req = next(r for r in FLASHINFER.backends[backend].requires if r.id == "flashinfer_version")
        spec = str(req.kind.describe())
        assert contains(next(iter(_spec_of(req))), first[entry]), (entry, first[entry], spec)


def _spec_of(req: Requirement) -> list[Any]:
    version = getattr(req.kind, "version", None)
    assert version is not None
    return [version]


# What 'latency' (VLLM_FLASHINFER_MOE_BACKEND's default from 0.11.1) gives, by the CC test of
# get_flashinfer_moe_backend that sends it to CUTLASS instead, and the words the profile's note
# must use for it.
LATENCY_TO_CUTLASS = {
    "current_platform.is_device_capability(90)": "except SM90",
    "not current_platform.is_device_capability(100)": "CC 10.0",
    "not current_platform.is_device_capability_family(100)": "SM10x family",
}


@pytest.mark.parametrize(
    "version",
    [
        v
        for v in VLLM_RELEASES
        if Version("0.11.1") <= release_of(v) < Version("0.22")
        and (VLLM_DATA["releases"][v]["moe"].get("functions") or {}).get(
            "get_flashinfer_moe_backend"
        )
    ],
)
def test_what_latency_gives_is_said_as_the_release_decides_it(version: str) -> None:
    selections = VLLM_DATA["releases"][version]["moe"]["functions"]["get_flashinfer_moe_backend"][
        "selections"
    ]
    tests = {
        t
        for s in selections
        if s.get("return") == "FlashinferMoeBackend.CUTLASS"
        for c in s["when"]
        if "'latency'" in c or "'throughput'" in c  # the branch a value takes, not a fallback
        for t in LATENCY_TO_CUTLASS
        if t in c
    }
    assert len(tests) == 1, (version, selections)
    words = LATENCY_TO_CUTLASS[tests.pop()]
    fp4 = knob(moe_era(VLLM, version), "VLLM_USE_FLASHINFER_MOE_FP4")
    assert fp4 is not None and words in (fp4.note or ""), (version, fp4.note if fp4 else None)
