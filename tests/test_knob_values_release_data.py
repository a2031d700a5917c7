"""Every knob's `values:` in profiles/vllm.yaml and profiles/sglang.yaml against what each
release's code does with that value, on every compute capability.

For each release the extract covers (tools/extract/data/*.json, fields in tools/extract/README.md),
each era knob of both families, each spelling the profile accepts and each compute capability
the extract evaluates, the backend the profile says the value selects (`Knob.backend_for`,
`Knob.backend_when_on`, which honour `only_on`) is compared with the backend the release's own
selection code gives for that value alone (every other knob unset), read from the extract:

- vLLM variables: the selection statements of the release's NVFP4 linear selector, its MoE
  selector and `get_flashinfer_moe_backend`, whose `when` conditions are evaluated here on the
  compute capability (`is_device_capability`, `_family`, `has_device_capability`, as
  vllm/platforms/interface.py defines them); package probes (`has_flashinfer()`, ...) hold, since
  a value's meaning is what is asked, not whether its kernel is installed.
- vLLM flags: `--linear-backend` through `linear_backend_to_kernels`; `--moe-backend` through the
  release's choices and map_nvfp4_backend's members (tests/test_moe_release_data.py).
- SGLang flags: the release's `--fp4-gemm-backend` / `--moe-runner-backend` choices and the
  backend each choice names (tests/test_release_data.py, tests/test_moe_release_data.py);
  SGLang's two FP4 GEMM variables through the `backend=` argument its GEMM call passes.

Where the engine raises for a value on a GPU (no FlashInfer MoE supports it), the profile's
backend must be one the profile itself refuses on that GPU, so the lint reports the failure.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from test_moe_release_data import (
    ENUM_BACKEND,
    MOE_BACKEND_VALUE,
    SGLANG_VALUE,
    engine_accepts,
    rich_host,
)
from test_release_data import SG_BACKENDS
from test_release_data_vllm import KERNEL_BACKEND

from fp4doctor import profile
from fp4doctor.profile import ProfileError
from fp4doctor.profile.model import Era, Knob
from fp4doctor.profile.schema import parse
from fp4doctor.rules import EngineVersion, era_for, evaluate
from fp4doctor.versions import bounds, release_of

DATA = Path(__file__).resolve().parent.parent / "tools" / "extract" / "data"
VLLM_DATA: dict[str, Any] = json.loads((DATA / "vllm.json").read_text(encoding="utf-8"))
SGLANG_DATA: dict[str, Any] = json.loads((DATA / "sglang.json").read_text(encoding="utf-8"))
PROFILES = {"vllm": profile.load("vllm"), "sglang": profile.load("sglang")}
DATASETS = {"vllm": VLLM_DATA, "sglang": SGLANG_DATA}
CCS = tuple(int(c) for c in VLLM_DATA["compute_capabilities_evaluated"])
RAISES = "raises"  # the engine refuses the value on that GPU

# The literal backends vLLM's linear selection chains assign (before the kernel registry).
LINEAR_LITERAL = {
    "'flashinfer-trtllm'": "flashinfer-trtllm",
    "'flashinfer-cutlass'": "flashinfer-cutlass",
    "'flashinfer-cudnn'": "flashinfer-cudnn",
    "'cutlass'": "cutlass",
    "'marlin'": "marlin",
    "'fbgemm'": "fbgemm",
    "NvFp4LinearBackend.FBGEMM": "fbgemm",
    "NvFp4LinearBackend.EMULATION": "emulation",
    "NvFp4LinearBackend.FLASHINFER_CUTLASS": "flashinfer-cutlass",
    "NvFp4LinearBackend.VLLM_CUTLASS": "cutlass",
    "NvFp4LinearBackend.MARLIN": "marlin",
}
# FlashInfer's MoE runner enum in get_flashinfer_moe_backend -> the profile's MoE backend.
FI_MOE = {
    "FlashinferMoeBackend.CUTLASS": "flashinfer-cutlass-moe",
    "FlashinferMoeBackend.TENSORRT_LLM": "flashinfer-trtllm-moe",
    "FlashinferMoeBackend.CUTEDSL": "flashinfer-cutedsl-moe",
}
# get_flashinfer_moe_backend's backend_map (flashinfer_utils.py, 0.12.0-0.23).
FI_MOE_MAP = {"throughput": "CUTLASS", "latency": "TENSORRT_LLM", "masked_gemm": "CUTEDSL"}
# The FlashInfer TRT-LLM experts' device gate where the extract lists no experts class for it
# (0.15-0.16: flashinfer_trtllm_moe.py is_supported_config_trtllm, is_device_capability_family
# (100); profiles/vllm.yaml flashinfer-trtllm-moe engine_compute_capability).
TRTLLM_FAMILY = range(100, 110)


def covered(target: str) -> list[str]:
    first = bounds(PROFILES[target].eras[0].versions)[0]
    assert first is not None
    data = DATASETS[target]
    return [v for v in data["covers"] if release_of(v) >= first and v in data["releases"]]


def era_of(target: str, family: str, version: str) -> Era:
    """The era of `version` as `family` sees it (its own knobs, inherited ones included)."""
    era, engine = era_for(PROFILES[target].view(family), EngineVersion(version, "--engine-version"))
    assert engine.covered, (target, version)
    return era


# --- a small evaluator of the extract's `when` conditions --------------------------------------


class _Platform:
    def __init__(self, cc: int) -> None:
        self.cc = cc

    def _cc(self, n: int | tuple[int, int]) -> int:
        return n[0] * 10 + n[1] if isinstance(n, tuple) else n

    def has_device_capability(self, n: int | tuple[int, int]) -> bool:
        return self.cc >= self._cc(n)

    def is_device_capability(self, n: int | tuple[int, int]) -> bool:
        return self.cc == self._cc(n)

    def is_device_capability_family(self, n: int) -> bool:
        return self.cc // 10 == n // 10

    def is_cuda(self) -> bool:
        return True


class _Envs:
    def __init__(self, env: dict[str, Any]) -> None:
        self._env = env

    def __getattr__(self, name: str) -> Any:
        return self._env.get(name)

    def is_set(self, name: str) -> bool:
        return name in self._env


def _probe() -> bool:
    return True  # a package probe: the value's meaning, not its kernel's presence, is asked


PROBES = (
    "has_flashinfer",
    "cutlass_fp4_supported",
    "is_fp4_marlin_supported",
    "has_flashinfer_cutlass_fused_moe",
    "has_flashinfer_cutedsl_grouped_gemm_nt_masked",
)


def holds(conditions: list[str], names: dict[str, Any]) -> bool:
    """Whether every `when` entry holds; a name the evaluator does not know fails the test."""
    scope: dict[str, Any] = {"__builtins__": {}, **{p: _probe for p in PROBES}, **names}
    for text in conditions:
        try:
            if not eval(compile(ast.parse(text, mode="eval"), text, "eval"), scope):
                return False
        except NameError as e:
            raise AssertionError(f"teach this test the name in {text!r}: {e}") from e
    return True


class _Opaque:
    """A value the evaluator does not compute (an enum member, a kernel class): truthy, equal
    only to itself."""


class _Members:
    """An enum or module whose members are opaque (`NvFp4LinearBackend.MARLIN`)."""

    def __getattr__(self, name: str) -> _Opaque:
        return _Opaque()


class _Self:
    """`self` of the selection method: its backend so far; FlashInfer allowed (installed)."""

    backend: Any = None
    allow_flashinfer = True


def _value(expr: str) -> Any:
    try:
        return ast.literal_eval(expr)
    except ValueError:
        return _Opaque()


def last_set(selections: list[dict[str, Any]], names: dict[str, Any]) -> str | None:
    """What the selection assigns last among the assignments whose conditions hold (an
    if/elif chain after a default); RAISES when a raise holds before anything is chosen."""
    me = _Self()
    scope = {**names, "self": me, "NvFp4LinearBackend": _Members()}
    chosen = None
    for s in selections:
        scope["backend"] = scope["force_kernel"] = me.backend
        if not holds(s["when"], scope):
            continue
        if "raise" in s:
            if chosen is None and s["when"]:
                return RAISES
            continue
        if "set" in s:
            me.backend = _value(s["to"])
            chosen = None if s["to"] in ("None", "'none'") else s["to"]
        if "return" in s and chosen is not None:
            return chosen
    return chosen


# --- vLLM ---------------------------------------------------------------------------------------


def vllm_env_value(knob: Knob, spelling: str) -> Any:
    return bool(int(spelling)) if knob.type == "bool" else spelling


def vllm_linear_selector(release: dict[str, Any], variable: str) -> dict[str, Any]:
    """The newest linear selector of the release that reads `variable` (the ModelOpt one first:
    the profiles model ModelOpt checkpoints; compressed-tensors-only variables from theirs)."""
    selectors = [s for s in release["linear"]["selectors"] if variable in (s.get("reads") or [])]
    assert selectors, f"no linear selector reads {variable}"
    modelopt = [s for s in selectors if "ModelOpt" in s["function"]]
    return (modelopt or selectors)[-1]


def vllm_linear_env(release: dict[str, Any], knob: Knob, spelling: str, cc: int) -> set[str]:
    selector = vllm_linear_selector(release, knob.name)
    env = {knob.name: vllm_env_value(knob, spelling)}
    names = {
        "envs": _Envs(env),
        "current_platform": _Platform(cc),
        "backend_name": spelling,
        "linear_backend": "auto",
        "is_supported": True,  # a forced kernel the GPU supports (its gate is the profile's)
        "use_a16": False,  # the W4A4 layer: a W4A16 variant differs by its with_env
    }
    to = last_set(selector["selections"], names)
    assert to is not None and to != RAISES, (knob.name, spelling, cc, selector["function"])
    if to in LINEAR_LITERAL:
        return {LINEAR_LITERAL[to]}
    if to in KERNEL_BACKEND:
        return {KERNEL_BACKEND[to]}
    if to in ("envs.VLLM_NVFP4_GEMM_BACKEND", "NvFp4LinearBackend(envs.VLLM_NVFP4_GEMM_BACKEND)"):
        return {spelling}  # the variable's value is the backend's name
    if to == "_NVFP4_BACKEND_TO_KERNEL.get(backend_name)":
        return {KERNEL_BACKEND[release["linear"]["env_backend_to_kernel"][spelling]]}
    raise AssertionError(f"teach this test what {to!r} selects")


def get_flashinfer_moe_backend(release: dict[str, Any], value: str, cc: int) -> str:
    gfmb = release["moe"]["functions"]["get_flashinfer_moe_backend"]
    names = {
        "flashinfer_moe_backend": value,
        "backend_map": FI_MOE_MAP,
        "current_platform": _Platform(cc),
    }
    for s in gfmb["selections"]:
        if holds(s["when"], names):
            if "raise" in s:
                return RAISES
            to = s["return"]
            if to == "backend_map[flashinfer_moe_backend]":
                return FI_MOE[f"FlashinferMoeBackend.{FI_MOE_MAP[value]}"]
            return FI_MOE[to]
    raise AssertionError("get_flashinfer_moe_backend returned nothing")


def first_supported_flashinfer_moe(release: dict[str, Any], cc: int) -> str:
    """vLLM 0.15+ with VLLM_USE_FLASHINFER_MOE_FP4=1 and VLLM_FLASHINFER_MOE_BACKEND unset: the
    first FlashInfer experts of AVAILABLE_BACKENDS whose device gate accepts the GPU."""
    for member in release["moe"]["auto_order"]:
        name = member.removeprefix("NvFp4MoeBackend.")
        if not name.startswith("FLASHINFER"):
            continue
        experts = release["moe"]["experts"].get(member) or []
        if not experts and name == "FLASHINFER_TRTLLM":
            accepts = cc in TRTLLM_FAMILY
        else:
            accepts = any(e["gate"]["accepts_cc"].get(str(cc)) for e in experts)
        if accepts:
            return ENUM_BACKEND[name]
    return RAISES


def vllm_moe_env(release: dict[str, Any], knob: Knob, spelling: str, cc: int) -> set[str]:
    functions = release["moe"].get("functions") or {}
    default = (release["envs"]["fp4"].get("VLLM_FLASHINFER_MOE_BACKEND") or {}).get("default")
    selector = release["moe"].get("selector") or {}
    walks = any(
        "not (envs.is_set('VLLM_FLASHINFER_MOE_BACKEND'))" in s["when"]
        for s in selector.get("selections", [])
    )
    if knob.name == "VLLM_FLASHINFER_MOE_BACKEND":
        if "get_flashinfer_moe_backend" in functions:
            return {get_flashinfer_moe_backend(release, spelling, cc)}
        init = functions["ModelOptNvFp4FusedMoE.__init__"]  # 0.10.1: decided in modelopt.py
        to = last_set(init["selections"], {"flashinfer_moe_backend": spelling})
        return {RAISES if to in (None, RAISES) else FI_MOE[to]}
    assert knob.name == "VLLM_USE_FLASHINFER_MOE_FP4", knob.name
    if walks:
        return {first_supported_flashinfer_moe(release, cc)}
    if "get_flashinfer_moe_backend" in functions and default is not None:
        return {get_flashinfer_moe_backend(release, default, cc)}
    # 0.10.0-0.10.1: the variable turns on FlashInfer's CUTLASS fused MoE (the default
    # 'throughput' of 0.10.1; 0.10.0 has no other FlashInfer MoE: ModelOptNvFp4FusedMoE).
    return {"flashinfer-cutlass-moe"}


def vllm_expected(version: str, family: str, knob: Knob, spelling: str, cc: int) -> set[str]:
    release = VLLM_DATA["releases"][version]
    if knob.name == "--linear-backend":
        return {KERNEL_BACKEND[k] for k in release["linear"]["linear_backend_to_kernels"][spelling]}
    if knob.name == "--moe-backend":
        assert spelling in release["cli"]["--moe-backend"]["choices"], (version, spelling)
        return {MOE_BACKEND_VALUE[spelling]}
    if family == "moe":
        return vllm_moe_env(release, knob, spelling, cc)
    return vllm_linear_env(release, knob, spelling, cc)


# --- SGLang -------------------------------------------------------------------------------------

# SGLANG_USE_CUTLASS_BACKEND_FOR_FP4_GEMM (0.5.3rc2-0.5.4): true passes backend='cutlass' to
# FlashInfer's mm_fp4, false passes nothing, i.e. mm_fp4's default backend, 'cudnn' in the
# FlashInfer releases these SGLang releases pin (tools/extract/data/flashinfer.json
# default_backend before 0.6.0).
SG_CUTLASS_SWITCH = {"true": "flashinfer-cutlass", "1": "flashinfer-cutlass"}


def sglang_expected(version: str, family: str, knob: Knob, spelling: str, cc: int) -> set[str]:
    release = SGLANG_DATA["releases"][version]
    if knob.name == "--moe-runner-backend":
        assert spelling in release["moe"]["moe_runner_backend_flag"]["choices"]["values"]
        return {SGLANG_VALUE[spelling]}
    if knob.name == "--fp4-gemm-backend":
        assert spelling in release["fp4_gemm_backend_flag"]["choices"]["values"]
        return {SG_BACKENDS[spelling]} | (
            {"flashinfer-cutedsl-w4a16"} if spelling == "flashinfer_cutedsl" else set()
        )
    dispatch = release["linear"]["dispatch"]
    if knob.name == "SGLANG_USE_CUTLASS_BACKEND_FOR_FP4_GEMM":
        # backend='cutlass' under the switch: a literal with a `when` (0.5.3) or an expression
        assert "USE_CUTLASS_BACKEND_FOR_FP4_GEMM" in json.dumps(dispatch), dispatch
        return {SG_CUTLASS_SWITCH.get(spelling.lower(), "flashinfer-cudnn")}
    if knob.name == "SGLANG_FLASHINFER_FP4_GEMM_BACKEND":
        # the value (a `flashinfer_` prefix dropped) is passed on as mm_fp4's backend
        assert any(isinstance(d["backend"], dict) for d in dispatch), dispatch
        return {"flashinfer-" + spelling.removeprefix("flashinfer_")}
    raise AssertionError(f"teach this test what SGLang's {knob.name} selects")


EXPECTED: dict[str, Callable[[str, str, Knob, str, int], set[str]]] = {
    "vllm": vllm_expected,
    "sglang": sglang_expected,
}


def spellings(knob: Knob) -> list[str]:
    return ["1"] if knob.type == "bool" else knob.accepted()


def selected(knob: Knob, spelling: str, cc: int) -> str | None:
    if knob.type == "bool":
        return knob.backend_when_on(cc)
    return knob.backend_for(spelling, cc)


CASES = [
    (target, family, version)
    for target in ("vllm", "sglang")
    for family in ("linear", "moe")
    for version in covered(target)
]


@cache
def refused(target: str, backend: str, version: str, cc: int) -> bool:
    """Whether the profile refuses `backend` on a GPU of `cc` by the engine's own gates."""
    own = {"cutlass_fp4_supported", "native_cuda"}
    return not engine_accepts(target, backend, version, cc, own)


@pytest.mark.parametrize(("target", "family", "version"), CASES)
def test_every_knob_value_selects_what_the_release_selects(
    target: str, family: str, version: str
) -> None:
    era = era_of(target, family, version)
    wrong = []
    for knob in era.knobs:
        if not knob.select:
            continue  # a switch with side effects the profile never writes (VLLM_USE_FBGEMM)
        for spelling in spellings(knob):
            for cc in CCS:
                ours = selected(knob, spelling, cc)
                theirs = EXPECTED[target](version, family, knob, spelling, cc)
                if theirs == {RAISES}:
                    if ours is None or refused(target, ours, version, cc):
                        continue
                elif ours in theirs:
                    continue
                wrong.append(f"{knob.name}={spelling} on {cc}: profile {ours}, release {theirs}")
    assert not wrong, f"{target} {version} {family}:\n" + "\n".join(wrong)


def test_the_rtx_5090_reads_vllm_use_flashinfer_moe_fp4_as_cutlass() -> None:
    """Issue 39's case: vLLM 0.13 with VLLM_USE_FLASHINFER_MOE_FP4=1 on an RTX 5090 (SM120)
    runs FlashInfer's CUTLASS fused MoE (get_flashinfer_moe_backend: 'latency' and not the
    SM10x family), TRT-LLM on a B200."""
    era = era_of("vllm", "moe", "0.13.0")
    knob = next(k for k in era.knobs if k.name == "VLLM_USE_FLASHINFER_MOE_FP4")
    assert knob.backend_when_on(120) == "flashinfer-cutlass-moe"
    assert knob.backend_when_on(100) == "flashinfer-trtllm-moe"
    assert knob.backend_when_on(103) == "flashinfer-trtllm-moe"


# --- `only_on`: the schema and the lint ---------------------------------------------------------

GPU_DEPENDENT = """\
schema: 1
target: demo
title: Demo
engine:
  package: demo-engine
  newest_known: "1.2.0"
backends:
  fast:
    summary: the fast one
    native: true
  slow:
    summary: the slow one
    native: false
eras:
  - versions: "<2"
    source: test
    knobs:
      - env: DEMO_BACKEND
        values: {fast: quick, slow: [slow, quick]}
        only_on: {fast: ">=10.0,<11.0"}
    auto:
      - backend: slow
"""


def test_only_on_maps_one_spelling_per_gpu() -> None:
    knob = parse(GPU_DEPENDENT, "demo.yaml").eras[0].knobs[0]
    assert knob.backend_for("quick", 100) == "fast"
    assert knob.backend_for("quick", 120) == "slow"
    assert knob.backend_for("quick", None) == "fast"  # no GPU known: as written
    assert knob.backend_for("slow", 100) == "slow"
    # Written for `slow`, its first spelling is not shadowed; a knob whose written spelling
    # means another backend on some GPUs is written only when nothing else selects it.
    assert not knob.shadowed("slow") and not knob.shadowed("fast")


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (
            'only_on: {fast: ">=10.0,<11.0"}',
            'only_on: {fastest: ">=10.0"}',
            "'eras[0].knobs[0].only_on.fastest' names no value of this knob (valid: fast, slow)",
        ),
        (
            "values: {fast: quick, slow: [slow, quick]}",
            "values: {fast: quick, slow: slow}",
            "limits a backend whose spellings no later backend of `values` shares",
        ),
    ],
)
def test_only_on_errors(old: str, new: str, expected: str) -> None:
    with pytest.raises(ProfileError) as info:
        parse(GPU_DEPENDENT.replace(old, new, 1), "demo.yaml")
    assert expected in str(info.value)


def test_the_lint_reads_the_variable_on_the_engines_first_gpu() -> None:
    """An RTX 5090 with vLLM 0.13 and VLLM_USE_FLASHINFER_MOE_FP4=1: the lint says FlashInfer
    CUTLASS (valid there), not TRT-LLM (which would make a working host NOT READY)."""
    host = rich_host(120)
    env = {"VLLM_USE_FLASHINFER_MOE_FP4": "1"}
    ev = evaluate(PROFILES["vllm"], host, env=env, override_version="0.13.0", family="moe")
    found = {f.id: f for f in ev.env_findings}
    chosen = found["env.VLLM_USE_FLASHINFER_MOE_FP4"]
    assert chosen.backend == "flashinfer-cutlass-moe", chosen.reason
    assert "env.VLLM_USE_FLASHINFER_MOE_FP4.backend" not in found
    b200 = evaluate(
        PROFILES["vllm"], rich_host(100), env=env, override_version="0.13.0", family="moe"
    )
    assert {f.id: f for f in b200.env_findings}["env.VLLM_USE_FLASHINFER_MOE_FP4"].backend == (
        "flashinfer-trtllm-moe"
    )
