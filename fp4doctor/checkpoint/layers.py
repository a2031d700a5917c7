"""From tensor names and shapes to layer classes: which GEMMs a model runs, in which format,
with which full (unsharded) N and K, and how tensor parallelism splits them.

An NVFP4 weight is stored `[N, K/2]` in uint8 (two E2M1 values a byte) beside an FP8 E4M3
block-scale tensor `[N, K/16]` (`weight_scale`); ModelOpt names the weight `weight`,
compressed-tensors `weight_packed`. A W4A4 module also stores an activation scale
(ModelOpt `input_scale`, compressed-tensors `input_global_scale`); a weight-only (W4A16) one does
not. A module whose weight is not packed FP4 is not quantised (excluded). The parallel style of
each projection is the engines' (vLLM `ColumnParallelLinear` / `RowParallelLinear` /
`ReplicatedLinear` in vllm/model_executor/models/llama.py, deepseek_v2.py, qwen3_moe.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from fp4doctor.checkpoint.safetensors import TensorInfo

FAMILY_LINEAR = "linear"
FAMILY_MOE = "moe"

COLUMN = "column"  # splits N across the tensor-parallel ranks
ROW = "row"  # splits K
REPLICATED = "replicated"  # every rank holds the whole matrix
HEADS = "heads"  # column-parallel by attention heads (KV heads replicated below TP)
EXPERTS = "experts"  # the MoE: experts split over EP, the intermediate size over TP/EP

SCHEME_W4A4 = "W4A4"
SCHEME_W4A16 = "W4A16"
SCHEME_NONE = "none"  # not NVFP4 in this checkpoint (excluded)

# projection name -> (layer class, parallel style); experts and shared experts get a prefix.
_PROJECTIONS: dict[str, tuple[str, str]] = {
    "q_proj": ("qkv", HEADS), "k_proj": ("qkv", HEADS), "v_proj": ("qkv", HEADS),
    "qkv_proj": ("qkv", HEADS), "o_proj": ("o", ROW),
    "q_a_proj": ("mla.q_a", REPLICATED), "kv_a_proj_with_mqa": ("mla.kv_a", REPLICATED),
    "q_b_proj": ("mla.q_b", COLUMN), "kv_b_proj": ("mla.kv_b", COLUMN),
    "gate_proj": ("gate_up", COLUMN), "up_proj": ("gate_up", COLUMN),
    "gate_up_proj": ("gate_up", COLUMN), "w1": ("gate_up", COLUMN), "w3": ("gate_up", COLUMN),
    "down_proj": ("down", ROW), "w2": ("down", ROW),
    "lm_head": ("lm_head", COLUMN),
}  # fmt: skip
# The projections that make a gated MLP (a gate beside the up projection, or both fused).
GATED_PARTS = ("gate_proj", "gate_up_proj", "w1", "w3")
# The order layer classes are shown in: as a token meets them.
_CLASS_ORDER = {name: i for i, name in enumerate((
    "mla.q_a", "mla.q_b", "mla.kv_a", "mla.kv_b", "qkv", "o", "gate_up", "down",
    "shared_experts.gate_up", "shared_experts.down", "experts.gate_up", "experts.down", "lm_head",
))}  # fmt: skip
# The order of fused parts, as the engines concatenate them (q, k, v; gate, up).
_PART_ORDER = {"q_proj": 0, "k_proj": 1, "v_proj": 2, "gate_proj": 0, "w1": 0, "up_proj": 1,
               "w3": 1}  # fmt: skip
_WEIGHT_SUFFIXES = (".weight_packed", ".weight")
_ACT_SCALES = (".input_scale", ".input_global_scale")
_INDEX = re.compile(r"\.(\d+)(?=\.|$)")


@dataclass(frozen=True)
class LayerClass:
    """One kind of GEMM in the model, as the checkpoint holds it (full, unsharded)."""

    name: str  # qkv, o, gate_up, down, experts.gate_up, shared_experts.down, lm_head, mla.q_b ...
    family: str  # FAMILY_LINEAR | FAMILY_MOE
    style: str  # COLUMN | ROW | REPLICATED | HEADS | EXPERTS
    scheme: str  # SCHEME_W4A4 | SCHEME_W4A16 | SCHEME_NONE
    n: int  # output features (gate_up: gate and up together)
    k: int  # input features
    count: int  # modules of this class in the checkpoint (experts counted one by one)
    example: str  # one module, for the reader to find it
    parts: tuple[int, ...] = ()  # N of each fused part (q, k, v; gate, up)
    experts: int = 0  # MoE: number of routed experts

    @property
    def fp4(self) -> bool:
        return self.scheme != SCHEME_NONE

    @property
    def gated(self) -> bool:
        """A gate_up class holding a gate beside the up projection (N is 2 x the intermediate
        size); False for an up projection alone (relu2 experts: N is the intermediate size)."""
        if not self.name.endswith("gate_up"):
            return False
        return len(self.parts) == 2 or self.example.rsplit(".", 1)[-1] in GATED_PARTS


@dataclass(frozen=True)
class _Module:
    path: str
    pattern: str  # the path with every index replaced by '*'
    cls: str
    style: str
    n: int
    k: int
    scheme: str
    expert: bool
    fused_experts: int  # a 3-D fused expert tensor: its expert count


def classify(path: str) -> tuple[str, str, bool] | None:
    """(layer class, parallel style, is-an-expert) of a module path, None for what is no GEMM
    fp4doctor judges (embeddings, routers, norms)."""
    parts = path.split(".")
    proj = parts[-1]
    if proj not in _PROJECTIONS:
        return None
    cls, style = _PROJECTIONS[proj]
    if cls in ("gate_up", "down"):
        if any(p in ("shared_expert", "shared_experts") for p in parts):
            return f"shared_experts.{cls}", style, False
        if "experts" in parts:
            return f"experts.{cls}", EXPERTS, True
    return cls, style, False


def modules(tensors: Mapping[str, TensorInfo]) -> list[_Module]:
    """Every GEMM module the tensors describe, with its format and full shape."""
    out: list[_Module] = []
    for name, info in tensors.items():
        suffix = next((s for s in _WEIGHT_SUFFIXES if name.endswith(s)), None)
        if suffix is None or len(info.shape) not in (2, 3):
            continue
        path = name[: -len(suffix)]
        if suffix == ".weight" and f"{path}.weight_packed" in tensors:
            continue
        found = classify(path)
        if found is None:
            continue
        cls, style, expert = found
        scale = tensors.get(f"{path}.weight_scale")
        packed = info.dtype == "U8" and scale is not None and scale.dtype == "F8_E4M3"
        n, k = info.shape[-2], info.shape[-1] * (2 if packed else 1)
        if packed:
            w4a4 = any(f"{path}{s}" in tensors for s in _ACT_SCALES)
            scheme = SCHEME_W4A4 if w4a4 else SCHEME_W4A16
        else:
            scheme = SCHEME_NONE
        fused = info.shape[0] if len(info.shape) == 3 else 0
        if fused and not expert:
            cls, style, expert = f"experts.{cls.split('.')[-1]}", EXPERTS, True
        pattern = _INDEX.sub(".*", path)
        out.append(_Module(path, pattern, cls, style, n, k, scheme, expert, fused))
    return out


def layer_classes(mods: Iterable[_Module], found: Scan | None = None) -> list[LayerClass]:
    """Group modules into layer classes; fused parts (q, k, v; gate, up) are added up, from the
    first layer that has them. `names`, every tensor name of the checkpoint (a sharded one's
    index), counts the modules and experts when only some shards' headers were read."""
    by_cls: dict[str, list[_Module]] = {}
    for m in sorted(mods, key=lambda m: _natural(m.path)):
        by_cls.setdefault(m.cls, []).append(m)
    tally = {c: (n, found.experts.get(c, 0)) for c, n in found.counts.items()} if found else {}
    out: list[LayerClass] = []
    for cls, members in by_cls.items():
        first = members[0]
        prefix = _layer_prefix(first.path)
        same_layer = [m for m in members if _layer_prefix(m.path) == prefix]
        if first.expert:
            # One expert's parts: the first expert's modules in the first layer.
            expert_key = _expert_prefix(first.path)
            same_layer = [m for m in same_layer if _expert_prefix(m.path) == expert_key]
        same_layer.sort(key=lambda m: _PART_ORDER.get(m.path.rsplit(".", 1)[-1], 0))
        parts = tuple(m.n for m in same_layer)
        n = sum(parts) if cls.endswith(("qkv", "gate_up")) else first.n
        paths, experts_seen = tally.get(cls, (0, 0))
        if not paths:
            paths = sum(m.fused_experts or 1 for m in members)
            experts_seen = len({_expert_prefix(m.path) for m in members
                                if _layer_prefix(m.path) == prefix})  # fmt: skip
        experts = first.fused_experts or experts_seen
        out.append(
            LayerClass(
                name=cls,
                family=FAMILY_MOE if first.expert else FAMILY_LINEAR,
                style=first.style,
                scheme=first.scheme,
                n=n,
                k=first.k,
                count=max(1, paths // max(1, len(same_layer))) * (first.fused_experts or 1),
                example=first.path,
                parts=parts if len(parts) > 1 else (),
                experts=experts if first.expert else 0,
            )
        )
    return sorted(out, key=lambda c: (_CLASS_ORDER.get(c.name, len(_CLASS_ORDER)), c.name))


@dataclass
class Scan:
    """What the tensor names alone say, in one pass: per layer class, its weight tensors, the
    experts of its first layer, and the files that hold its first module group."""

    counts: dict[str, int]
    experts: dict[str, int]
    files: set[str]


_DIGITS = re.compile(r"\d+")
_MARK_DIGITS = str.maketrans("0123456789", "##########")


def scan(items: Iterable[tuple[str, str]]) -> Scan:
    """Scan (tensor name, file) pairs. Names are grouped by module first, and a module's class
    is cached per name pattern (a model has a few dozen), so a 180,000-tensor index costs a
    dictionary insert a name and one regex call a module."""
    files_of: dict[str, list[str]] = {}
    for name, file in items:
        files_of.setdefault(name[: name.rfind(".")], []).append(file)
    counts: dict[str, int] = {}
    first: dict[str, tuple[int, ...]] = {}  # class -> indices (layer, expert) of its first group
    files: dict[str, set[str]] = {}
    experts: dict[str, dict[int, set[int]]] = {}
    known: dict[str, tuple[str, bool] | None] = {}
    for path, where in files_of.items():
        pattern = path.translate(_MARK_DIGITS)
        if pattern in known:
            hit = known[pattern]
        else:
            found = classify(path)
            hit = known[pattern] = (found[0], found[2]) if found else None
        if hit is None:
            continue
        cls, expert = hit
        counts[cls] = counts.get(cls, 0) + 1
        nums = tuple(map(int, _DIGITS.findall(path)))
        best = first.get(cls)
        if best is None or nums < best:
            first[cls], files[cls] = nums, set(where)
        elif nums == best:
            files[cls].update(where)
        if expert and len(nums) > 1:
            experts.setdefault(cls, {}).setdefault(nums[0], set()).add(nums[1])
    return Scan(
        counts,
        {c: len(by_layer[min(by_layer)]) for c, by_layer in experts.items()},
        {f for fs in files.values() for f in fs},
    )


def _natural(path: str) -> tuple[object, ...]:
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in path.split("."))


def _layer_prefix(path: str) -> str:
    m = re.search(r"^(.*?\blayers\.\d+)\.", path)
    return m.group(1) if m else ""


def _expert_prefix(path: str) -> str:
    m = re.search(r"^(.*?\bexperts\.\d+)\.", path)
    return m.group(1) if m else path
