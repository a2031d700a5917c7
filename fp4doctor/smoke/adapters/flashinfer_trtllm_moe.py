"""FlashInfer's TRT-LLM fused NVFP4 MoE, called as vLLM's `TrtLlmNvFp4ExpertsMonolithic` calls it.

`flashinfer.fused_moe.trtllm_fp4_block_scale_moe` (FlashInfer 0.2.9rc1+; the keyword call below
is the one vLLM makes in vllm/model_executor/layers/fused_moe/experts/trtllm_nvfp4_moe.py,
`TrtLlmNvFp4ExpertsMonolithic.apply`, 0.33). Unlike the CUTLASS MoE the caller does all the
layout work, so every operand here follows an upstream file:

- the input is quantised by the caller to NVFP4 with the layer's input scale (`a1_gscale`):
  uint8 `[T, H/2]` and E4M3 block scales `[T, H/16]` in the *linear* layout (vLLM's prepare
  step quantises with `is_sf_swizzled_layout=False`; FlashInfer's docstring: "only the linear
  layout is supported"). The case's input is on the NVFP4 grid of that scale, so
  `nvfp4.quantize` gives the bytes FlashInfer's `fp4_quantize` gives, and it is done once in
  `bind`, outside the timed call;
- routing from the router logits inside the kernel: `routing_method_type=1` (Renormalize:
  top-k then softmax, what `moe.route` computes), `n_group=topk_group=0`, no bias;
- `gemm1_weights`: w13 reordered up (w3) first (vLLM `reorder_w1w3_to_w3w1`, in
  vllm/model_executor/layers/quantization/utils/flashinfer_fp4_moe.py
  `prepare_nvfp4_moe_layer_for_fi_or_cutlass`), then per expert the rows of the two halves
  interleaved (FlashInfer `get_reorder_rows_for_gated_act_gemm_row_indices`,
  flashinfer/fused_moe/core.py) and shuffled for the transposed MMA output
  (`shuffle_matrix_a`, `epilogue_tile_m=128`), as vLLM's
  `prepare_static_weights_for_trtllm_fp4_moe` does through FlashInfer's
  `_maybe_get_cached_w3_w1_permute_indices`; `gemm2_weights` only shuffled
  (`get_w2_permute_indices_with_cache`);
- block scales: the same row permutations, then the 128x4 swizzle
  (`nvfp4_block_scale_interleave`), reshaped back to `[E, rows, K/16]` float8_e4m3fn;
- per-expert float32 scalars, as vLLM's `TrtLlmNvFp4ExpertsBase`: `output1_scale_gate_scalar =
  g1_alphas = 1 / (gs_a1 · gs_w13)`, `output1_scale_scalar = g1_alphas · gs_a2` (`g1_scale_c`,
  the scale the kernel requantises the intermediate with), `output2_scale_scalar = g2_alphas =
  1 / (gs_a2 · gs_w2)`;
- the SwiGLU activation (`ActivationType.Swiglu`, 3), `do_finalize=True`, `output=out`.

Before the call the adapter asks FlashInfer's own predicate, `is_trtllm_moe_supported(E2m1,
E2m1)` (flashinfer/fused_moe/core.py: false below compute capability 10): the trtllm-gen
cubins are SM100-family only, and launching them elsewhere is not a refusal but a crash or a
missing-JIT-cache skip. A false answer is `Refused`, worded with the predicate's name.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from fp4doctor.smoke import nvfp4
from fp4doctor.smoke.adapters import Refused
from fp4doctor.smoke.adapters.flashinfer_mm_fp4 import flashinfer_call
from fp4doctor.smoke.adapters.flashinfer_moe import FlashInferFusedMoe, up_first
from fp4doctor.smoke.moe import MoeCase

EPILOGUE_TILE_M = 128
"""vLLM's `prepare_static_weights_for_trtllm_fp4_moe`: `epilogue_tile_m = 128  # FIXME: this
depends on the kernel internals`."""

RENORMALIZE = 1
"""`flashinfer.tllm_enums.RoutingMethodType.Renormalize`: TopK -> Softmax (`moe.route`)."""

SWIGLU = 3
"""`flashinfer.fused_moe.ActivationType.Swiglu`: silu(gate) * up, the problem's activation."""


def gated_interleave(w: torch.Tensor) -> torch.Tensor:
    """`[E, 2I, ...]` rows [X1; X2] -> [X1[0], X2[0], X1[1], X2[1], ...] per expert: FlashInfer's
    `get_reorder_rows_for_gated_act_gemm_row_indices` (flashinfer/fused_moe/core.py), which the
    fused gated-activation epilogue reads as row pairs."""
    half = w.shape[1] // 2
    return torch.stack([w[:, :half], w[:, half:]], dim=2).reshape(w.shape).contiguous()


def shuffled_weights(packed: torch.Tensor, gated: bool) -> torch.Tensor:
    """Per-expert NVFP4 bytes `[E, rows, K/2]` in the trtllm-gen layout (uint8): the gated
    interleave (w13 only), then TRT-LLM's `shuffleMatrixA` row shuffle."""
    w = gated_interleave(packed) if gated else packed
    return torch.stack([nvfp4.shuffle_matrix_a(e, EPILOGUE_TILE_M) for e in w]).view(torch.uint8)


def shuffled_scales(scales: torch.Tensor, gated: bool) -> torch.Tensor:
    """Per-expert linear block scales `[E, rows, K/16]` permuted like their weights and swizzled
    128x4 (`shuffleMatrixSfA`), as `[E, rows, K/16]` float8_e4m3fn: vLLM's reshape of
    `nvfp4_block_scale_interleave`'s output. Rows are a multiple of 128 and K/16 of 4 in every
    problem (`moe.SHAPES`), so the swizzle adds no padding and the reshape is exact."""
    s = gated_interleave(scales) if gated else scales
    rows, cols = s.shape[1:]
    out = [nvfp4.scale_grid(nvfp4.shuffle_matrix_sf_a(e, EPILOGUE_TILE_M), rows, cols) for e in s]
    return torch.stack(out).view(torch.float8_e4m3fn)


@dataclass(frozen=True)
class FlashInferTrtllmMoe(FlashInferFusedMoe):
    name: str = "flashinfer-trtllm-moe"
    entry: str = "trtllm_fp4_block_scale_moe"
    since: str = "0.2.9rc1"

    def _refuse_unsupported_gpu(self, device: torch.device) -> None:
        """FlashInfer's own answer to "does trtllm-gen FP4 MoE run here?", asked before any
        launch. Absent in a FlashInfer without it: then the call decides."""
        try:
            core = importlib.import_module("flashinfer.fused_moe.core")
            enums = importlib.import_module("flashinfer.tllm_enums")
        except ImportError:
            return
        supported = getattr(core, "is_trtllm_moe_supported", None)
        dtypes = getattr(enums, "DtypeTrtllmGen", None)
        if supported is None or dtypes is None or device.type != "cuda":
            return
        try:
            answer = supported(dtypes.E2m1, dtypes.E2m1)
        except Exception:
            # FlashInfer 0.7.4's predicate passes torch.cuda.current_device() (an int) to
            # get_compute_capability, which wants a torch.device: it raises AttributeError
            # on every GPU. Then the call itself decides.
            return
        if not answer:
            major, minor = torch.cuda.get_device_capability(device)
            raise Refused(
                "FlashInfer refused: fused_moe.core.is_trtllm_moe_supported(E2m1, E2m1) is "
                f"False on compute capability {major}.{minor} (its trtllm-gen fused-MoE "
                "cubins are built for SM100-family GPUs only)"
            )

    def bind(self, case: MoeCase, out: torch.Tensor) -> Callable[[], object]:
        fused_moe = self._fused_moe()
        flashinfer = importlib.import_module("flashinfer")
        self._refuse_unsupported_gpu(out.device)
        x_fp4, x_sf, _ = nvfp4.quantize(case.x.float(), case.x_global_scale)
        w13 = shuffled_weights(up_first(case.w13.packed, case.inter), gated=True)
        w13_sf = shuffled_scales(up_first(case.w13.scales.view(torch.uint8), case.inter), True)
        w2 = shuffled_weights(case.w2.packed, gated=False)
        w2_sf = shuffled_scales(case.w2.scales.view(torch.uint8), gated=False)
        a1 = case.x_global_scale.to(torch.float32)
        a2 = case.inter_global_scale.to(torch.float32)
        g1_alphas = (1.0 / (a1 * case.w13.global_scale)).to(torch.float32)
        g1_scale_c = (g1_alphas * a2).to(torch.float32)
        g2_alphas = (1.0 / (a2 * case.w2.global_scale)).to(torch.float32)
        fn = fused_moe.trtllm_fp4_block_scale_moe
        extra: dict[str, Any] = {}
        sf_layout = getattr(flashinfer, "SfLayout", None)
        if sf_layout is not None and "hidden_states_scale_layout" in _parameters(fn):
            # FlashInfer 0.7+ deprecates leaving the layout undeclared (None warns and infers
            # linear); vLLM 0.33 does not pass it yet. Declaring it changes no bytes.
            extra["hidden_states_scale_layout"] = sf_layout.layout_linear

        def call() -> object:
            with flashinfer_call(flashinfer):
                return fn(
                    routing_logits=case.router_logits.to(torch.float32),
                    routing_bias=None,
                    hidden_states=x_fp4,
                    hidden_states_scale=x_sf.view(torch.float8_e4m3fn),
                    gemm1_weights=w13,
                    gemm1_weights_scale=w13_sf,
                    gemm1_bias=None,
                    gemm1_alpha=None,
                    gemm1_beta=None,
                    gemm1_clamp_limit=None,
                    gemm2_weights=w2,
                    gemm2_weights_scale=w2_sf,
                    gemm2_bias=None,
                    output1_scale_scalar=g1_scale_c,
                    output1_scale_gate_scalar=g1_alphas,
                    output2_scale_scalar=g2_alphas,
                    num_experts=case.experts,
                    top_k=case.top_k,
                    n_group=0,
                    topk_group=0,
                    intermediate_size=case.inter,
                    local_expert_offset=0,
                    local_num_experts=case.experts,
                    routed_scaling_factor=None,
                    routing_method_type=RENORMALIZE,
                    do_finalize=True,
                    activation_type=SWIGLU,
                    output=out,
                    **extra,
                )

        return call


def _parameters(fn: Callable[..., object]) -> set[str]:
    try:
        return set(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return set()


TRTLLM = FlashInferTrtllmMoe()
