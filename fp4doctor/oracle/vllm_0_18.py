"""vLLM 0.18.0 to 0.23.x: the NVFP4 linear backend is `select_nvfp4_linear_backend()` in
vllm/model_executor/layers/quantization/utils/nvfp4_utils.py (read in the 0.18.0 wheel: the
environment decides, `VLLM_NVFP4_GEMM_BACKEND` or the automatic order FlashInfer CUTLASS on
SM100+ with FlashInfer, vLLM CUTLASS, Marlin), logged as `Using NvFp4LinearBackend.X for
NVFP4 GEMM`. The MoE backend is `select_nvfp4_moe_backend` (vllm_base), with `--moe-backend`
from the engine arguments (vllm/engine/arg_utils.py, 0.18.0).

Worker side only (torch and vLLM are imported here)."""

from __future__ import annotations

import contextlib
from typing import Any

from fp4doctor.oracle import engine_side, vllm_base
from fp4doctor.oracle.answers import Case


class Session(vllm_base.Session):
    def load(self) -> None:
        from vllm.model_executor.layers.quantization.utils import nvfp4_utils

        self.select: Any = nvfp4_utils.select_nvfp4_linear_backend

    def configured(self, args: Any) -> contextlib.AbstractContextManager[Any]:
        return contextlib.nullcontext(args)  # the selection reads the environment only

    def linear(self, case: Case) -> str:
        if case.a16:
            raise engine_side.NotAsked("this adapter asks vLLM 0.18-0.23 for W4A4 layers only")
        return str(self.select().value)
