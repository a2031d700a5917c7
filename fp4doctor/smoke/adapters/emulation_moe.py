"""MoE emulation: dequantise the experts with fp4doctor.nvfp4 and run them in float32, on the
CPU or a GPU. vLLM's `Nvfp4QuantizationEmulationTritonExperts` does the same (0.20+).

The MoE path that always runs, so the whole MoE smoke pipeline (problem, routing, check) is
exercised on every host, GPU or not. It computes in the device's own float32 and quantises
the input and the intermediate through `nvfp4.quantize`, as the kernels do.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from fp4doctor.smoke import moe, nvfp4
from fp4doctor.smoke.moe import MoeCase


def _dequantize_experts(experts: moe.Experts) -> torch.Tensor:
    return torch.stack(
        [
            nvfp4.dequantize(p, s, g)
            for p, s, g in zip(experts.packed, experts.scales, experts.global_scale, strict=True)
        ]
    )


@dataclass(frozen=True)
class EmulationMoe:
    name: str = "emulation-moe"
    supports_cpu: bool = True
    shapes: tuple[tuple[int, int, int], ...] = moe.SHAPES

    def load(self) -> str:
        return f"torch {torch.__version__}"

    def make_case(self, tokens: int, hidden: int, inter: int, device: str) -> MoeCase:
        return moe.make_case(tokens, hidden, inter, device)

    def bind(self, case: MoeCase, out: torch.Tensor) -> Callable[[], object]:
        # The weights are dequantised once, as at load; the activations per call.
        w13 = _dequantize_experts(case.w13)
        w2 = _dequantize_experts(case.w2)

        def call() -> object:
            xq = nvfp4.snap(case.x.float(), case.x_global_scale)[3]
            acc = torch.zeros(case.tokens, case.hidden, dtype=torch.float32, device=out.device)
            for e in range(case.experts):  # each expert on the tokens routed to it
                token, slot = torch.nonzero(case.topk_ids == e, as_tuple=True)
                if token.numel() == 0:
                    continue
                h = xq[token] @ w13[e].T
                act = torch.nn.functional.silu(h[:, : case.inter]) * h[:, case.inter :]
                act_q = nvfp4.snap(act, case.inter_global_scale)[3]
                y = (act_q @ w2[e].T) * case.topk_weights[token, slot].unsqueeze(1)
                acc.index_add_(0, token, y)
            return out.copy_(acc)

        return call


ADAPTER = EmulationMoe()
