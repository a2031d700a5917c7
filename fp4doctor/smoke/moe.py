"""The MoE smoke problems: a small NVFP4 mixture of experts and the answer a correct kernel gives.

What the engines run for an NVFP4 MoE layer (vLLM's fused_moe experts, SGLang's MoE runners,
FlashInfer's fused MoE): each token is routed to its `top_k` experts (softmax over the top-k
router logits, renormalised: vLLM's `RoutingMethodType.Renormalize`); each expert computes
`silu(x @ w1.T) * (x @ w3.T)` (the gated SiLU, "SwiGLU"), quantises that intermediate to NVFP4
with the layer's second input scale, and multiplies it by `w2`; the token's output is the
routing-weighted sum. Weights are per-expert NVFP4 (block scales and a global scale per
expert); activations are quantised by the kernel with one global scale per layer.

Operands are built like the linear cases (`fp4doctor.smoke.cases`): sparse randn snapped onto
the NVFP4 grid, on the CPU from a fixed seed, so that the kernel's own quantisation of the
input is exact and every device gets the same bytes. The float64 reference quantises the
intermediate as the kernels do (`nvfp4.quantize`, FlashInfer's arithmetic), so the only
differences left are accumulation order and the kernels' approximate reciprocals.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from fp4doctor.smoke import nvfp4
from fp4doctor.smoke.cases import DENSITY, SEED

EXPERTS = 4
TOP_K = 2
SHAPES: tuple[tuple[int, int, int], ...] = ((16, 256, 256), (5, 256, 128))
"""(tokens, hidden, intermediate): hidden and intermediate are multiples of 128 (the CUTLASS
and TRT-LLM MoE tiles); 5 tokens leaves most experts with one or no token. Kept small so the
CPU reference run takes well under a second."""


@dataclass(frozen=True)
class Experts:
    """One stack of per-expert NVFP4 weights `[E, rows, K]`: bytes, linear block scales, one
    encode global scale per expert, and the exact values they encode."""

    packed: torch.Tensor  # uint8 [E, rows, K/2]
    scales: torch.Tensor  # float8_e4m3fn [E, rows, K/16], linear layout
    global_scale: torch.Tensor  # float32 [E], encode scales
    deq: torch.Tensor  # float32 [E, rows, K]

    def to(self, device: str | torch.device) -> Experts:
        return Experts(
            *(t.to(device) for t in (self.packed, self.scales, self.global_scale, self.deq))
        )

    def scales_128x4(self) -> torch.Tensor:
        """Each expert's block scales in the 128x4 swizzled layout, stacked `[E, R, Kb]`
        (R and Kb rounded up to 128 and 4), as FlashInfer's and vLLM's MoE kernels take them."""
        rows, cols = self.scales.shape[1:]
        return torch.stack(
            [nvfp4.scale_grid(nvfp4.swizzle_128x4(s), rows, cols) for s in self.scales]
        )


@dataclass(frozen=True)
class MoeCase:
    """One MoE problem, with the interface of a linear `Case` that the harness uses
    (`shape`, `new_output`, `ref`): out[t, h] for `tokens` tokens of width `hidden`."""

    tokens: int
    hidden: int
    inter: int
    x: torch.Tensor  # bf16 [T, H], on the NVFP4 grid of `x_global_scale`
    x_global_scale: torch.Tensor  # float32 0-d: the layer's input encode scale (a1)
    inter_global_scale: torch.Tensor  # float32 0-d: the intermediate's encode scale (a2)
    w13: Experts  # [E, 2I, H]: rows 0..I-1 are w1 (gate), I..2I-1 are w3 (up)
    w2: Experts  # [E, H, I]
    router_logits: torch.Tensor  # float32 [T, E]
    topk_ids: torch.Tensor  # int32 [T, top_k]
    topk_weights: torch.Tensor  # float32 [T, top_k], renormalised softmax
    ref: torch.Tensor  # float64 [T, H] on the CPU

    @property
    def experts(self) -> int:
        return int(self.w13.packed.shape[0])

    @property
    def top_k(self) -> int:
        return int(self.topk_ids.shape[1])

    @property
    def shape(self) -> list[int]:
        return [self.tokens, self.hidden, self.inter]

    def new_output(self, device: str | torch.device) -> torch.Tensor:
        """A bf16 `[T, H]` output poisoned with NaN, so unwritten rows show."""
        return torch.full(
            (self.tokens, self.hidden), float("nan"), dtype=torch.bfloat16, device=device
        )


def route(logits: torch.Tensor, top_k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-k experts per token and their weights: softmax over the k largest logits
    (Renormalize routing; ties broken by the lower expert index)."""
    values, ids = torch.topk(logits, top_k, dim=-1, sorted=True)
    return ids.to(torch.int32), torch.softmax(values, dim=-1).to(torch.float32)


def _per_expert(rows: torch.Tensor, weights: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """`rows[r] @ weights[ids[r]].T` in float64 for every row `r`: `[R, O]` from rows `[R, K]`,
    weights `[E, O, K]` and expert ids `[R]`. Every row meets every expert (E is small), which
    costs less than gathering a `[R, O, K]` copy of the weights."""
    every = torch.einsum("rk,eok->reo", rows.to(torch.float64), weights.to(torch.float64))
    return every[torch.arange(rows.shape[0]), ids.long()]


def _intermediate(x: torch.Tensor, w13: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """silu(gate) * up for every routed (token, slot) pair, float64 `[T * top_k, I]`."""
    inter = w13.shape[1] // 2
    rows = x.repeat_interleave(ids.shape[1], dim=0)  # [T*k, H]
    h = _per_expert(rows, w13, ids.reshape(-1))
    return torch.nn.functional.silu(h[:, :inter]) * h[:, inter:]


def _combine(act: torch.Tensor, w2: torch.Tensor, ids: torch.Tensor, weights: torch.Tensor,
             inter_global_scale: torch.Tensor) -> torch.Tensor:  # fmt: skip
    """Quantise the intermediate `act` with the layer's scale, multiply by each row's `w2`,
    and sum each token's rows with its routing weights: float64 `[T, H]`."""
    packed, scales, gs = nvfp4.quantize(act.to(torch.float32), inter_global_scale)
    act_q = nvfp4.dequantize(packed, scales, gs)
    y = _per_expert(act_q, w2, ids.reshape(-1)) * weights.reshape(-1, 1).to(torch.float64)
    return y.reshape(ids.shape[0], ids.shape[1], -1).sum(dim=1)


def reference_moe(case_x: torch.Tensor, w13: torch.Tensor, w2: torch.Tensor,
                  ids: torch.Tensor, weights: torch.Tensor,
                  inter_global_scale: torch.Tensor) -> torch.Tensor:  # fmt: skip
    """The answer, in float64 on the CPU: per token, the weighted sum over its experts of
    `nvfp4(silu(x w1ᵀ) * (x w3ᵀ)) @ w2ᵀ`, the intermediate quantised with the layer's scale."""
    return _combine(_intermediate(case_x, w13, ids), w2, ids, weights, inter_global_scale)


def _sparse(shape: tuple[int, ...], gen: torch.Generator) -> torch.Tensor:
    x = torch.randn(*shape, generator=gen, dtype=torch.float32)
    return x * (torch.rand(*shape, generator=gen) < DENSITY)


def _experts(x: torch.Tensor) -> Experts:
    parts = [nvfp4.snap(w) for w in x]
    return Experts(*(torch.stack([p[i] for p in parts]) for i in range(4)))


def make_case(tokens: int, hidden: int, inter: int, device: str | torch.device,
              seed: int = SEED) -> MoeCase:  # fmt: skip
    """The problem (tokens, hidden, intermediate) with operands on `device`; the same bytes
    for every device. The weights are scaled by 1/sqrt(K) so the intermediate stays O(1)."""
    gen = torch.Generator().manual_seed(seed + 7_000_003 * tokens + 1013 * hidden + inter)
    x_raw = _sparse((tokens, hidden), gen) * 4
    # A power-of-two input scale: the snapped values are then exact in bf16, which is what the
    # kernels take and quantise themselves (to the same bytes, with the same scale).
    amax = float(x_raw.abs().max()) or 1.0
    x_gs = torch.tensor(2.0 ** math.floor(math.log2(nvfp4.E4M3_MAX * nvfp4.E2M1_MAX / amax)))
    x_deq = nvfp4.snap(x_raw, x_gs)[3]
    w13 = _experts(_sparse((EXPERTS, 2 * inter, hidden), gen) / hidden**0.5)
    w2 = _experts(_sparse((EXPERTS, hidden, inter), gen) / inter**0.5)
    logits = torch.randn(tokens, EXPERTS, generator=gen, dtype=torch.float32)
    ids, weights = route(logits, TOP_K)
    # The intermediate's scale as a calibrated checkpoint holds it: from its amax on this batch.
    act = _intermediate(x_deq, w13.deq, ids)
    amax = float(act.abs().max())
    inter_gs = torch.tensor(nvfp4.E4M3_MAX * nvfp4.E2M1_MAX / max(amax, 1e-6))
    ref = _combine(act, w2.deq, ids, weights, inter_gs)
    return MoeCase(
        tokens=tokens,
        hidden=hidden,
        inter=inter,
        x=x_deq.to(torch.bfloat16).to(device),
        x_global_scale=x_gs.to(torch.float32).to(device),
        inter_global_scale=inter_gs.to(torch.float32).to(device),
        w13=w13.to(device),
        w2=w2.to(device),
        router_logits=logits.to(device),
        topk_ids=ids.to(device),
        topk_weights=weights.to(device),
        ref=ref,
    )
