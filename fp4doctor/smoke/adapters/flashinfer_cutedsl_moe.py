"""FlashInfer's CuTe-DSL fused NVFP4 MoE, called as vLLM's `FlashInferCuteDSLExperts` calls it.

`flashinfer.fused_moe.cute_dsl_fused_moe_nvfp4` (FlashInfer 0.6.4+; deprecated in 0.7 in favour
of `cute_dsl_fused_moe(quant_mode="w4a4")`, to which it forwards every argument). The keyword
call below is the one in vllm/model_executor/layers/fused_moe/experts/flashinfer_cutedsl_moe.py
(`FlashInferCuteDSLExperts.apply`, 0.33), and the weights are laid out as
vllm/model_executor/layers/quantization/utils/flashinfer_fp4_moe.py
`prepare_nvfp4_moe_layer_for_flashinfer_cutedsl` lays them out:

- the input quantised by the caller with the layer's input scale: uint8 `[T, H/2]`, block
  scales `[T, H/16, 1]` float8_e4m3fn in the linear layout (vLLM: "a1q_scale is (M, K//16)
  float8_e4m3fn from fp4_quantize ... The functional API expects x_sf with trailing dim";
  the kernel gathers the unpermuted tokens' rows, so the scales are per row, unpadded);
- routing precomputed: `token_selected_experts` int32 `[T, k]`, `token_final_scales` float32;
- `w1_weight`: w13 reordered [up; gate] (`reorder_w13_to_w31_for_flashinfer_cutedsl`), then
  the two halves interleaved in 64-row groups (`interleave_linear_and_gate(group_size=64,
  dim=1)`), uint8 `[E, 2I, H/2]`; `w2_weight` as stored, `[E, H, I/2]`;
- block scales: the same row order, swizzled 128x4 per expert (`swizzle_blockscale`), then
  viewed in the CuTe MMA layout `(32, 4, m_tiles, 4, k_tiles, E)`
  (`nvfp4_swizzled_scale_to_cutedsl_mma_view` -> FlashInfer's
  flashinfer/cute_dsl/utils.py `convert_sf_to_mma_layout`, reproduced in `mma_view`);
- `w1_alpha = g1_alphas = 1 / (gs_a1 · gs_w13)`, `fc2_input_scale = a2_gscale` (one per
  expert, the layer's value repeated, as vLLM's prepare does), `w2_alpha = g2_alphas`.

FlashInfer declares the supported GPUs on the function itself (`@supported_compute_capability(
[100, 103, 107])` in flashinfer/fused_moe/cute_dsl/fused_moe.py); the adapter asks that
declaration (`is_compute_capability_supported`) before launching, so a GPU outside it is
`Refused` in FlashInfer's terms rather than a CuTe-DSL compile error or a crash.
"""

from __future__ import annotations

import importlib
import importlib.util
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

import torch

from fp4doctor.smoke import nvfp4
from fp4doctor.smoke.adapters import Refused, Unavailable
from fp4doctor.smoke.adapters.flashinfer_mm_fp4 import flashinfer_call
from fp4doctor.smoke.adapters.flashinfer_moe import FlashInferFusedMoe, up_first
from fp4doctor.smoke.moe import MoeCase

ENTRY = "cute_dsl_fused_moe_nvfp4"
"""The function vLLM calls (`vllm.utils.flashinfer.flashinfer_cute_dsl_fused_moe_nvfp4`) and the
profile's `moe_entry_point` names."""

GROUP = 64
"""vLLM's `interleave_linear_and_gate(..., group_size=64)` for the CuTe-DSL wrapper."""


def interleave_linear_and_gate(w: torch.Tensor, group: int = GROUP) -> torch.Tensor:
    """`[E, 2I, ...]` rows [up; gate] -> alternating `group`-row blocks [up0; gate0; up1; ...]:
    vLLM's `interleave_linear_and_gate` (flashinfer_fp4_moe.py) along dim 1."""
    e, rows = w.shape[:2]
    if rows % (2 * group):
        raise ValueError(f"w13 rows ({rows}) must be a multiple of {2 * group}")
    rest = w.shape[2:]
    x = w.reshape(e, 2, rows // (2 * group), group, *rest).transpose(1, 2)
    return x.contiguous().reshape(w.shape)


def mma_view(swizzled: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    """Per-expert 128x4 buffers `[E, Mp*Kp]` viewed as FlashInfer's CuTe MMA scale layout
    `(32, 4, m_tiles, 4, k_tiles, E)`, a strided view of storage ordered `(E, m_tiles, k_tiles,
    32, 4, 4)`: flashinfer/cute_dsl/utils.py `convert_sf_to_mma_layout`, step for step."""
    experts = swizzled.shape[0]
    m_tiles, k_tiles = -(-rows // 128), -(-cols // 4)
    six = swizzled.reshape(experts, m_tiles, k_tiles, 32, 4, 4)
    return six.permute(3, 4, 1, 5, 2, 0)


def mma_scales(scales: torch.Tensor) -> torch.Tensor:
    """Linear per-expert scales `[E, rows, K/16]` (uint8) -> 128x4 swizzled (vLLM
    `swizzle_blockscale`) -> the MMA view, as float8_e4m3fn."""
    rows, cols = scales.shape[1:]
    flat = torch.stack([nvfp4.swizzle_128x4(s) for s in scales])
    return mma_view(flat, rows, cols).view(torch.float8_e4m3fn)


@dataclass(frozen=True)
class FlashInferCuteDslMoe(FlashInferFusedMoe):
    name: str = "flashinfer-cutedsl-moe"
    entry: str = ENTRY
    since: str = "0.6.4"

    def missing(self, label: str) -> NoReturn:
        """flashinfer.fused_moe exports the CuTe-DSL MoE only when its `cute_dsl` subpackage
        imports (a try/except ImportError in flashinfer/fused_moe/__init__.py): a missing
        dependency there (nvidia-cutlass-dsl, triton) is a skip, an older FlashInfer a refusal."""
        if importlib.util.find_spec("flashinfer.fused_moe.cute_dsl") is None:
            super().missing(label)
        try:
            module = importlib.import_module("flashinfer.fused_moe.cute_dsl")
        except ModuleNotFoundError as exc:
            raise Unavailable(
                f"{label}: its CuTe-DSL MoE needs {exc.name}, which is not installed",
                str(exc),
            ) from exc
        except ImportError as exc:
            raise Unavailable(
                f"{label}: flashinfer.fused_moe.cute_dsl does not import: {exc}"
            ) from exc
        if getattr(module, ENTRY, None) is None:
            # The subpackage imports, but defines its kernels only when CuTe DSL is usable
            # (flashinfer/fused_moe/cute_dsl/__init__.py: `if is_cute_dsl_available():`).
            try:
                availability = importlib.import_module("flashinfer.cute_dsl.availability")
                usable = bool(availability.is_cute_dsl_available())
            except (ImportError, AttributeError):
                usable = True  # an older FlashInfer without the switch: the function is absent
            if not usable:
                why = (
                    "which is not installed"
                    if importlib.util.find_spec("cutlass") is None
                    else "which FlashInfer finds unusable here (is_cute_dsl_available)"
                )
                raise Unavailable(
                    f"{label}: its CuTe-DSL MoE needs CuTe DSL (nvidia-cutlass-dsl), {why}"
                )
            super().missing(label)
        raise Refused(f"{label}: fused_moe.cute_dsl has {ENTRY} but fused_moe does not export it")

    @staticmethod
    def _refuse_unsupported_gpu(fn: Any, device: torch.device) -> None:
        """FlashInfer's own declaration of where the function runs, asked before any launch."""
        supported = getattr(fn, "is_compute_capability_supported", None)
        if supported is None or device.type != "cuda":
            return
        major, minor = torch.cuda.get_device_capability(device)
        if not supported(major * 10 + minor):
            ccs = sorted(getattr(fn, "_supported_ccs", ()))
            raise Refused(
                f"FlashInfer refused: fused_moe.{ENTRY} is declared for compute capabilities "
                f"{ccs} (@supported_compute_capability), not {major * 10 + minor}"
            )

    def bind(self, case: MoeCase, out: torch.Tensor) -> Callable[[], object]:
        fused_moe = self._fused_moe()
        flashinfer = importlib.import_module("flashinfer")
        fn = getattr(fused_moe, ENTRY)
        self._refuse_unsupported_gpu(fn, out.device)
        x_fp4, x_sf, _ = nvfp4.quantize(case.x.float(), case.x_global_scale)
        w13 = interleave_linear_and_gate(up_first(case.w13.packed, case.inter))
        w13_sf = mma_scales(
            interleave_linear_and_gate(up_first(case.w13.scales.view(torch.uint8), case.inter))
        )
        w2 = case.w2.packed.contiguous()
        w2_sf = mma_scales(case.w2.scales.view(torch.uint8))
        a1 = case.x_global_scale.to(torch.float32)
        a2 = case.inter_global_scale.to(torch.float32)
        g1_alphas = (1.0 / (a1 * case.w13.global_scale)).to(torch.float32)
        g2_alphas = (1.0 / (a2 * case.w2.global_scale)).to(torch.float32)
        a2_gscale = a2.reshape(1).expand(case.experts).contiguous()

        def call() -> object:
            with flashinfer_call(flashinfer), warnings.catch_warnings():
                # 0.7 deprecates this name in favour of cute_dsl_fused_moe; vLLM calls it.
                warnings.simplefilter("ignore", DeprecationWarning)
                return fn(
                    x=x_fp4,
                    x_sf=x_sf.view(torch.float8_e4m3fn).unsqueeze(-1),
                    token_selected_experts=case.topk_ids.to(torch.int32),
                    token_final_scales=case.topk_weights.float(),
                    w1_weight=w13,
                    w1_weight_sf=w13_sf,
                    w1_alpha=g1_alphas,
                    fc2_input_scale=a2_gscale,
                    w2_weight=w2,
                    w2_weight_sf=w2_sf,
                    w2_alpha=g2_alphas,
                    num_experts=case.experts,
                    top_k=case.top_k,
                    num_local_experts=case.experts,
                    local_expert_offset=0,
                    moe_output=out,
                )

        return call


CUTE_DSL = FlashInferCuteDslMoe()
