"""The checkpoint's content: per layer class and per expert, whether each tensor the declared
NVFP4 format needs is there, in the dtype the format stores, with sane scalar scales.

Pure: tensor names (the index's, or every header's), what the headers say of them, and the values
of the scalar scales read (`safetensors.read_scalars`) in; `Defect`s out. What each engine
release does with a defect is data (profiles/shapes.yaml `content`, fp4doctor/checkpoint/
content_rules.py) and becomes a finding in fp4doctor/checkpoint/content_judge.py.

The tensors of one NVFP4 module, as the engines' loaders name their parameters:

- ModelOpt: `weight` (U8, two E2M1 values a byte), `weight_scale` (F8_E4M3 block scales),
  `weight_scale_2` (F32 global scale), `input_scale` (F32, W4A4 only);
- compressed-tensors: `weight_packed` (U8), `weight_scale` (F8_E4M3), `weight_global_scale`
  (F32), `input_global_scale` (F32, W4A4 only)

(vllm-project/vllm vllm/model_executor/layers/quantization/modelopt.py
ModelOptNvFp4FusedMoE.create_weights `w13_weight_scale_2`, `w13_input_scale` and KNvfp4Static /
KNvfp4Dynamic.create_weights, wheels 0.33.0 and 0.34.0; .../compressed_tensors/schemes/
compressed_tensors_w4a4_nvfp4.py `weight_global_scale`, `input_global_scale`, wheel 0.33.0;
sgl-project/sglang sglang/srt/layers/quantization/modelopt_quant.py ModelOptFp4LinearMethod's
table "input_scale | weight | weight_scale | weight_scale_2", wheels 0.5.15-0.5.23.)

A module is NVFP4 when its weight is packed (U8) or its block scales are F8_E4M3, or, where the
header was not read, when it stores a global scale; an FP8 module of a mixed checkpoint (an F8
weight, F32 scales) is not judged here. Expected tensors per module are the format's, plus any
its siblings (the same module in other layers and experts) store; experts are expected to be the
same in every layer of a class (a header-only fixture that stores 8 of 256 experts is whole).
"""

from __future__ import annotations

import fnmatch
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fp4doctor.checkpoint.layers import FAMILY_LINEAR, FAMILY_MOE, classify
from fp4doctor.checkpoint.quant import CT_NVFP4, CT_NVFP4A16, MODELOPT_NVFP4, QuantConfig
from fp4doctor.checkpoint.safetensors import TensorInfo

MISSING = "missing"  # a tensor the format needs is not in the checkpoint
ZERO = "zero"  # a scalar scale is 0
NONFINITE = "nonfinite"  # a scalar scale is inf or NaN
GATE_UP = "gate_up_scale"  # gate (w1) and up (w3) global scales differ where they are fused
DTYPE = "dtype"  # a tensor's dtype is not the one the declared format stores
TRUNCATED = "truncated"  # a tensor's bytes lie past the end of its file
NOT_READ = "not_read"  # part of the content was not read (over the bound)
KINDS = (MISSING, ZERO, NONFINITE, GATE_UP, DTYPE, TRUNCATED, NOT_READ)

MODULE = "module"  # MISSING's tensor when the whole module (weight and scales) is absent
MODELOPT_NAMES = ("weight", "weight_scale", "weight_scale_2", "input_scale")
CT_NAMES = ("weight_packed", "weight_scale", "weight_global_scale", "input_global_scale")
_QUANT_SUFFIXES = frozenset(MODELOPT_NAMES[1:] + CT_NAMES)
_GLOBAL = frozenset({"weight_scale_2", "weight_global_scale"})
_ACT = frozenset({"input_scale", "input_global_scale"})
SCALARS = _GLOBAL | _ACT
_DTYPES = {"weight": "U8", "weight_packed": "U8", "weight_scale": "F8_E4M3",
           **dict.fromkeys(SCALARS, "F32")}  # fmt: skip
_UP_OF = {"gate_proj": "up_proj", "w1": "w3"}  # the gate (w1) and the up (w3) it is fused with
_EXPERT = re.compile(r"^(.*\bexperts)\.(\d+|#+)\.([^.]+)$")  # a path, or its pattern
_MARK_DIGITS = str.maketrans("0123456789", "##########")
EXAMPLES = 3
_NONE: frozenset[str] = frozenset()
# torch.allclose's defaults, as vLLM and SGLang compare w1 and w3 global scales.
RTOL, ATOL = 1e-5, 1e-8


@dataclass(frozen=True)
class Defect:
    """One kind of defect of one tensor in one layer class: how many, a few of their names."""

    kind: str  # one of KINDS
    layer: str  # layer class (experts.gate_up, qkv, ...); "" for the whole checkpoint
    family: str  # linear | moe | ""
    tensors: tuple[str, ...]  # the tensor names concerned (input_scale, weight_scale_2, ...)
    count: int  # tensors affected
    examples: tuple[str, ...]  # up to EXAMPLES full names
    experts: int = 0  # distinct experts affected (MoE)
    detail: str = ""  # what was found: a dtype, a value

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind, "layer": self.layer, "family": self.family,
            "tensors": list(self.tensors), "count": self.count, "examples": list(self.examples),
            "experts": self.experts, "detail": self.detail,
        }  # fmt: skip


@dataclass(frozen=True)
class Content:
    """What was read of the content, and its defects."""

    defects: tuple[Defect, ...] = ()
    modules: int = 0  # NVFP4 modules checked (experts one by one)
    scalars: int = 0  # scalar scales whose values were read
    bytes_read: int = 0  # bytes of tensor data read (the scalar scales only)
    headers_read: int = 0  # safetensors headers read for the content
    header_bytes: int = 0  # bytes of those headers
    values: str = "read"  # "read", or why the scalar values were not read

    def to_dict(self) -> dict[str, Any]:
        return {
            "modules": self.modules, "scalars": self.scalars, "bytes_read": self.bytes_read,
            "headers_read": self.headers_read, "header_bytes": self.header_bytes,
            "values": self.values, "defects": [d.to_dict() for d in self.defects],
        }  # fmt: skip


@dataclass
class _Tally:
    tensors: set[str] = field(default_factory=set)
    count: int = 0
    examples: list[str] = field(default_factory=list)
    experts: set[str] = field(default_factory=set)
    details: set[str] = field(default_factory=set)


class _Found:
    """Defects gathered per (kind, layer class, tensor), then summarised."""

    def __init__(self) -> None:
        self._by: dict[tuple[str, str, str, str], _Tally] = {}

    def add(self, kind: str, path: str, suffix: str, detail: str = "") -> None:
        hit = classify(path)
        layer, expert = (hit[0], hit[2]) if hit else ("", False)
        family = (FAMILY_MOE if expert else FAMILY_LINEAR) if hit else ""
        t = self._by.setdefault((kind, layer, family, suffix), _Tally())
        t.tensors.add(suffix)
        t.count += 1
        if len(t.examples) < EXAMPLES:
            t.examples.append(f"{path}.{suffix}" if suffix else path)
        m = _EXPERT.match(path)
        if expert and m:
            t.experts.add(f"{m.group(1)}.{m.group(2)}")
        if detail:
            t.details.add(detail)

    def defects(self) -> list[Defect]:
        return [
            Defect(kind, layer, family, tuple(sorted(t.tensors)), t.count, tuple(t.examples),
                   len(t.experts), ", ".join(sorted(t.details)))
            for (kind, layer, family, _), t in sorted(self._by.items())
        ]  # fmt: skip


def inspect(
    names: Iterable[str],
    infos: Mapping[str, TensorInfo],
    values: Mapping[str, tuple[float, ...]],
    quant: QuantConfig,
    beyond: Iterable[str] = (),
) -> tuple[list[Defect], int]:
    """The defects of the checkpoint whose tensor names are `names` (`infos`: what the headers
    read say of them; `values`: the scalar scales read; `beyond`: names whose bytes lie past the
    end of their file), and the number of NVFP4 modules checked."""
    modules: dict[str, set[str]] = {}
    for name in names:
        path, _, suffix = name.rpartition(".")
        if path:
            if path in modules:
                modules[path].add(suffix)
            else:
                modules[path] = {suffix}
    found = _Found()
    patterns = _patterns(modules)
    nvfp4 = {p for p, s in modules.items() if _is_nvfp4(p, s, infos)}
    act_required = quant.format == MODELOPT_NVFP4 and not quant.weight_only_groups
    names_of = CT_NAMES if quant.format in (CT_NVFP4, CT_NVFP4A16) else MODELOPT_NAMES
    checked: set[str] = set()
    for paths in patterns.values():
        quantized = [p for p in paths if p in nvfp4]
        if not quantized:
            continue
        expected = set(names_of[:3]) | {s for p in quantized for s in modules[p] if s in _DTYPES}
        if act_required:
            expected.add(names_of[3])
        for path in paths:
            have = modules.get(path, _NONE)
            if path not in nvfp4:
                if have & _QUANT_SUFFIXES or _excluded(path, quant.excluded):
                    continue  # another format's module (FP8 in a mixed checkpoint), or excluded
                weight = infos.get(f"{path}.weight")
                if weight is not None and have:
                    found.add(DTYPE, path, "weight", f"{weight.dtype} (not in the exclusions)")
                    continue
            checked.add(path)
            if not have:  # the whole module: an expert one layer lacks
                found.add(MISSING, path, MODULE)
                continue
            if not expected <= have:
                for suffix in sorted(expected - have):
                    found.add(MISSING, path, suffix)
    # One pass over the tensors read: dtypes, then the scalar values, of the modules checked.
    for name, info in infos.items():
        path, _, suffix = name.rpartition(".")
        want = _DTYPES.get(suffix)
        if want is not None and info.dtype != want and path in checked:
            found.add(DTYPE, path, suffix, f"{info.dtype}, not {want}")
    for name, got in values.items():
        if all(map(math.isfinite, got)) and all(got):
            continue
        path, _, suffix = name.rpartition(".")
        if path not in checked:
            continue
        kind = ZERO if all(map(math.isfinite, got)) else NONFINITE
        found.add(kind, path, suffix, _shown(got))
    _gate_up(modules, values, found)
    for name in beyond:
        path, _, suffix = name.rpartition(".")
        found.add(TRUNCATED, path, suffix)
    return found.defects(), len(checked)


def _patterns(modules: Mapping[str, set[str]]) -> dict[str, list[str]]:
    """GEMM module paths grouped by pattern (indices as '#'), with the experts each layer of an
    experts class lacks (every expert any layer of the class stores) added as absent paths."""
    known: dict[str, str | None] = {}  # pattern -> its experts pattern ("" for none), or None
    out: dict[str, list[str]] = {}
    grid: dict[str, dict[str, set[int]]] = {}  # experts pattern -> layer prefix -> experts
    projections: dict[str, set[str]] = {}
    for path in modules:
        pattern = path.translate(_MARK_DIGITS)
        if pattern not in known:
            expert = _EXPERT.match(pattern)
            known[pattern] = None if classify(path) is None else expert.group(1) if expert else ""
        key = known[pattern]
        if key is None:
            continue
        out.setdefault(pattern, []).append(path)
        if key:
            m = _EXPERT.match(path)
            if m:
                grid.setdefault(key, {}).setdefault(m.group(1), set()).add(int(m.group(2)))
                projections.setdefault(key, set()).add(m.group(3))
    for key, layers in grid.items():
        every = set().union(*layers.values())
        for prefix in layers:
            for proj in projections[key]:
                for e in sorted(every):
                    path = f"{prefix}.{e}.{proj}"
                    if path not in modules:
                        out.setdefault(path.translate(_MARK_DIGITS), []).append(path)
    return out


def _is_nvfp4(path: str, suffixes: set[str], infos: Mapping[str, TensorInfo]) -> bool:
    packed = infos.get(f"{path}.weight_packed") or infos.get(f"{path}.weight")
    scale = infos.get(f"{path}.weight_scale")
    if packed is not None or scale is not None:
        return bool(
            (packed is not None and packed.dtype == "U8")
            or (scale is not None and scale.dtype == "F8_E4M3")
            or suffixes & _GLOBAL
        )
    return bool(suffixes & (_GLOBAL | {"weight_packed"}))


def _excluded(path: str, patterns: Iterable[str]) -> bool:
    """Whether `path` is one of the modules the quantisation config leaves unquantised (a name,
    a prefix of it, or a shell pattern such as `model.layers.*.self_attn*`)."""
    for pat in patterns:
        if path == pat or path.startswith(pat + ".") or path.endswith("." + pat):
            return True
        if any(ch in pat for ch in "*?[") and (
            fnmatch.fnmatchcase(path, pat) or fnmatch.fnmatchcase(path, pat + ".*")
        ):
            return True
    return False


def _gate_up(
    modules: Mapping[str, set[str]], values: Mapping[str, tuple[float, ...]], found: _Found
) -> None:
    """Gate and up projections whose global scales differ (per expert, or a dense MLP's), as
    torch.allclose tells them apart."""
    for name, a in values.items():
        path, _, suffix = name.rpartition(".")
        parent, _, gate = path.rpartition(".")
        up = _UP_OF.get(gate)
        if up is None or suffix not in _GLOBAL:
            continue
        b = values.get(f"{parent}.{up}.{suffix}")
        if not a or not b or not all(map(math.isfinite, (a[0], b[0]))):
            continue
        if abs(a[0] - b[0]) > ATOL + RTOL * abs(b[0]):
            found.add(GATE_UP, path, suffix, f"{gate} {a[0]:g} vs {up} {b[0]:g}")


def _shown(values: tuple[float, ...]) -> str:
    return ", ".join(f"{v:g}" for v in values[:4])
