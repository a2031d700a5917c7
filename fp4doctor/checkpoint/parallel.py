"""Each rank's share of a layer class's GEMM, under tensor parallelism (and expert parallelism).

Column-parallel layers split N, row-parallel ones split K, replicated ones split nothing
(vllm-project/vllm vllm/model_executor/layers/linear.py ColumnParallelLinear,
RowParallelLinear, ReplicatedLinear; QKVParallelLinear replicates the KV heads when there are
fewer KV heads than ranks). The MoE splits the experts over the expert-parallel ranks and each
expert's intermediate size over the remaining TP/EP ranks (SGLang --ep-size; vLLM's
--enable-expert-parallel is EP = TP: whole experts per rank)
(vllm/model_executor/layers/fused_moe/config.py FusedMoEParallelConfig).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fp4doctor.checkpoint.layers import COLUMN, EXPERTS, HEADS, ROW, LayerClass


@dataclass(frozen=True)
class RankGemm:
    """One rank's GEMM for a layer class: out[M, n] = x[M, k] @ w[n, k].T (per expert for MoE)."""

    layer: LayerClass
    n: int
    k: int
    experts: int = 0  # experts this rank holds (MoE)
    intermediate: int = 0  # MoE: the per-rank intermediate size (gated gate_up N/2, else N; down K)
    problem: str | None = None  # the split is impossible (a size that TP does not divide)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "layer": self.layer.name,
            "family": self.layer.family,
            "scheme": self.layer.scheme,
            "style": self.layer.style,
            "full": [self.layer.n, self.layer.k],
            "per_rank": [self.n, self.k],
            "modules": self.layer.count,
            "example": self.layer.example,
        }
        if self.layer.experts:
            data |= {"experts_per_rank": self.experts, "intermediate_per_rank": self.intermediate}
        if self.problem:
            data["problem"] = self.problem
        return data


def _split(total: int, ways: int, what: str) -> tuple[int, str | None]:
    if ways <= 1:
        return total, None
    if total % ways:
        return total // ways, f"{what} {total} is not divisible by {ways}"
    return total // ways, None


def per_rank(layer: LayerClass, config: Mapping[str, Any], tp: int, ep: int = 1) -> RankGemm:
    """The GEMM one rank runs for `layer` at tensor-parallel size `tp` (expert-parallel `ep`)."""
    if layer.style == COLUMN:
        n, problem = _split(layer.n, tp, f"{layer.name} N")
        return RankGemm(layer, n, layer.k, problem=problem)
    if layer.style == ROW:
        k, problem = _split(layer.k, tp, f"{layer.name} K")
        return RankGemm(layer, layer.n, k, problem=problem)
    if layer.style == HEADS:
        return _heads(layer, config, tp)
    if layer.style == EXPERTS:
        moe_tp = max(1, tp // ep)
        experts, problem = _split(layer.experts, ep, "experts")
        if layer.gated:  # gate and up: N is twice the intermediate size
            inter, p2 = _split(layer.n // 2, moe_tp, "MoE intermediate size")
            return RankGemm(layer, 2 * inter, layer.k, experts, inter, problem or p2)
        if layer.name.endswith("gate_up"):  # up alone (relu2 experts): N is the intermediate size
            inter, p2 = _split(layer.n, moe_tp, "MoE intermediate size")
            return RankGemm(layer, inter, layer.k, experts, inter, problem or p2)
        inter, p2 = _split(layer.k, moe_tp, "MoE intermediate size")
        return RankGemm(layer, layer.n, inter, experts, inter, problem or p2)
    return RankGemm(layer, layer.n, layer.k)


def _heads(layer: LayerClass, config: Mapping[str, Any], tp: int) -> RankGemm:
    """q/k/v: query heads split over the ranks; KV heads split too, or replicated when there are
    fewer than ranks (vLLM QKVParallelLinear: num_kv_head_replicas)."""
    heads = _int(config, "num_attention_heads")
    kv = _int(config, "num_key_value_heads") or heads
    if not heads or len(layer.parts) != 3:
        n, problem = _split(layer.n, tp, f"{layer.name} N")
        return RankGemm(layer, n, layer.k, problem=problem)
    q_dim = layer.parts[0] // heads
    k_dim, v_dim = layer.parts[1] // kv, layer.parts[2] // kv
    q_rank, problem = _split(heads, tp, "attention heads")
    if kv >= tp:
        kv_rank, p2 = _split(kv, tp, "KV heads")
    else:
        kv_rank, p2 = 1, (f"{tp} ranks are not a multiple of {kv} KV heads" if tp % kv else None)
    n = q_rank * q_dim + kv_rank * (k_dim + v_dim)
    return RankGemm(layer, n, layer.k, problem=problem or p2)


def _int(config: Mapping[str, Any], key: str) -> int:
    value = config.get(key)
    if value is None and isinstance(config.get("text_config"), dict):
        value = config["text_config"].get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
