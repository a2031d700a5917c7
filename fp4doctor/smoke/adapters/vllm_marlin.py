"""vLLM's Marlin NVFP4 path (weight-only FP4, bf16 activations): what vLLM runs on GPUs
without native FP4 (SM75–SM90), so the one FP4 path expected to pass on an H200.

Best effort, and unverified: vLLM cannot be installed on the development host, and
`prepare_fp4_layer_for_marlin` / `apply_fp4_marlin_linear` changed between releases (the
weight global scale is `weight_scale_2` in older ModelOpt code and `weight_global_scale`
later; both are the *decode* scale 1/gs). The adapter builds a bare layer carrying both
names, lets vLLM repack it, and calls `apply_fp4_marlin_linear` with whichever keyword the
installed release declares. Without vLLM it is status `skip`, "vLLM not installed".
Activations are the exact-grid A in bf16, so the reference is the same `a_deq @ b_deq.T`
(bf16 rounding of A is far inside the tolerance).
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from fp4doctor.smoke.adapters import Refused
from fp4doctor.smoke.adapters.vllm_cutlass import load_vllm_ops
from fp4doctor.smoke.cases import Case

_MODULE = "vllm.model_executor.layers.quantization.utils.marlin_utils_fp4"
_GLOBAL_SCALE_NAMES = ("weight_global_scale", "weight_scale_2")


@dataclass(frozen=True)
class VllmMarlin:
    name: str = "vllm-marlin"
    supports_cpu: bool = False

    def load(self) -> str:
        label = load_vllm_ops()
        try:
            importlib.import_module(_MODULE)
        except ImportError as exc:
            raise Refused(f"{label} has no NVFP4 Marlin ({_MODULE}): {exc}") from exc
        return label

    def bind(self, case: Case, out: torch.Tensor) -> Callable[[], object]:
        marlin: Any = importlib.import_module(_MODULE)
        dev = out.device
        decode = (1.0 / case.b.global_scale.to(torch.float32)).reshape(1).to(dev)

        def param(t: torch.Tensor) -> torch.nn.Parameter:
            return torch.nn.Parameter(t, requires_grad=False)

        layer = torch.nn.Module()
        layer.weight = param(case.b.packed.clone())
        layer.weight_scale = param(case.b.scales.clone())
        for attr in _GLOBAL_SCALE_NAMES:
            setattr(layer, attr, param(decode.clone()))
        setattr(layer, "params_dtype", torch.bfloat16)  # noqa: B010  (plain attributes)
        setattr(layer, "output_size_per_partition", case.n)  # noqa: B010
        setattr(layer, "input_size_per_partition", case.k)  # noqa: B010
        marlin.prepare_fp4_layer_for_marlin(layer)

        params = inspect.signature(marlin.apply_fp4_marlin_linear).parameters
        scale_kw = next((n for n in _GLOBAL_SCALE_NAMES if n in params), None)
        if scale_kw is None:
            raise Refused(
                "apply_fp4_marlin_linear takes none of "
                f"{', '.join(_GLOBAL_SCALE_NAMES)}: signature {list(params)}"
            )
        x = case.a.deq.to(device=dev, dtype=torch.bfloat16)
        kwargs = {
            "input": x,
            "weight": layer.weight,
            "weight_scale": layer.weight_scale,
            scale_kw: getattr(layer, scale_kw),
            "workspace": layer.workspace,
            "size_n": case.n,
            "size_k": case.k,
            "bias": None,
        }

        def call() -> object:
            return out.copy_(marlin.apply_fp4_marlin_linear(**kwargs))

        return call


ADAPTER = VllmMarlin()
