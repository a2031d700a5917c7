"""FlashInfer's fused NVFP4 MoE, called as vLLM's `FlashInferExperts` calls it.

`flashinfer.fused_moe.cutlass_fused_moe` (FlashInfer 0.2.6+; the keyword call below is the
one vLLM makes in vllm/model_executor/layers/fused_moe/experts/flashinfer_cutlass_moe.py,
0.33.0):

- input: bf16 `[T, H]` (the kernel quantises it with `a1_gscale`; `input_sf` stays None);
- `token_selected_experts` int32 `[T, k]`, `token_final_scales` float32 `[T, k]`;
- `fc1_expert_weights`: w13 as `[E, 2I, H/2]` bytes viewed as int64, with the up projection
  (w3) first and the gate (w1) second (vLLM's `reorder_w1w3_to_w3w1` for FlashInfer);
- `quant_scales`: `[a1_gscale, w1 block scales (128x4, viewed int32), g1_alphas, a2_gscale,
  w2 block scales, g2_alphas]`, the alphas `1 / (gs_a · gs_w)` per expert;
- the SwiGLU activation (FlashInfer's default `ActivationType.Swiglu`).

On a GPU without FP4 tensor cores the library refuses in its own words (its SM90 module has
no NVFP4 W4A4 path); that text is the finding. Autotuning stays off.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

import torch

from fp4doctor.smoke import moe
from fp4doctor.smoke.adapters import Refused, Unavailable
from fp4doctor.smoke.adapters.flashinfer_mm_fp4 import flashinfer_call
from fp4doctor.smoke.moe import MoeCase


def up_first(w13: torch.Tensor, inter: int) -> torch.Tensor:
    """`[E, 2I, ...]` with rows [w1 (gate); w3 (up)] reordered to [w3; w1], as FlashInfer's
    CUTLASS and TRT-LLM MoE take them."""
    return torch.cat([w13[:, inter:], w13[:, :inter]], dim=1).contiguous()


@dataclass(frozen=True)
class FlashInferFusedMoe:
    """What the FlashInfer fused-MoE adapters share: the library's label, the check that its
    `fused_moe` has the entry point, and the shared MoE problem (smoke/moe.py)."""

    name: str
    entry: str  # the function in flashinfer.fused_moe
    since: str  # the first FlashInfer release that has it
    supports_cpu: bool = False
    shapes: tuple[tuple[int, int, int], ...] = moe.SHAPES

    def _fused_moe(self) -> Any:
        return importlib.import_module("flashinfer.fused_moe")

    def load(self) -> str:
        if importlib.util.find_spec("flashinfer") is None:
            raise Unavailable("flashinfer-python is not installed")
        flashinfer = importlib.import_module("flashinfer")
        label = f"flashinfer-python {getattr(flashinfer, '__version__', '?')}"
        if getattr(self._fused_moe(), self.entry, None) is None:
            self.missing(label)
        return label

    def missing(self, label: str) -> NoReturn:
        """Why the installed FlashInfer lacks the entry point (raises)."""
        raise Refused(f"{label} has no fused_moe.{self.entry} (added in {self.since})")

    def make_case(self, tokens: int, hidden: int, inter: int, device: str) -> MoeCase:
        return moe.make_case(tokens, hidden, inter, device)


@dataclass(frozen=True)
class FlashInferCutlassMoe(FlashInferFusedMoe):
    name: str = "flashinfer-cutlass-moe"
    entry: str = "cutlass_fused_moe"
    since: str = "0.2.6"

    def bind(self, case: MoeCase, out: torch.Tensor) -> Callable[[], object]:
        fused_moe = self._fused_moe()
        flashinfer = importlib.import_module("flashinfer")
        w13 = up_first(case.w13.packed, case.inter).view(torch.long)
        w13_sf = up_first(case.w13.scales_128x4(), case.inter).view(torch.int32)
        w2 = case.w2.packed.contiguous().view(torch.long)
        w2_sf = case.w2.scales_128x4().contiguous().view(torch.int32)
        a1 = case.x_global_scale.reshape(1).to(torch.float32)
        a2 = case.inter_global_scale.reshape(1).to(torch.float32)
        g1 = (1.0 / (a1 * case.w13.global_scale)).to(torch.float32)
        g2 = (1.0 / (a2 * case.w2.global_scale)).to(torch.float32)
        scales = [a1, w13_sf, g1, a2, w2_sf, g2]

        def call() -> object:
            with flashinfer_call(flashinfer):
                return fused_moe.cutlass_fused_moe(
                    input=case.x,
                    token_selected_experts=case.topk_ids.to(torch.int32),
                    token_final_scales=case.topk_weights,
                    fc1_expert_weights=w13,
                    fc2_expert_weights=w2,
                    output_dtype=torch.bfloat16,
                    quant_scales=scales,
                    input_sf=None,
                    output=out,
                )

        return call


CUTLASS = FlashInferCutlassMoe()
