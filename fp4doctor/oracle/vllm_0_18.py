"""vLLM 0.18.0 to 0.23.x: the NVFP4 linear backend is `select_nvfp4_linear_backend()` in
vllm/model_executor/layers/quantization/utils/nvfp4_utils.py (read in the 0.18.0 wheel: the
environment decides, `VLLM_NVFP4_GEMM_BACKEND` or the automatic order FlashInfer CUTLASS on
SM100+ with FlashInfer, vLLM CUTLASS, Marlin), logged as `Using NvFp4LinearBackend.X for
NVFP4 GEMM`. The MoE backend is `select_nvfp4_moe_backend` (vllm_base), with `--moe-backend`
from the kernel config (vllm/engine/arg_utils.py, 0.18.0).

Worker side only (torch and vLLM are imported here)."""

from __future__ import annotations

from typing import Any

from fp4doctor.oracle import vllm_base
from fp4doctor.oracle.answers import Answer, Case


class Session:
    """vLLM's selection code, imported (with the capability stub in place when asked)."""

    def __init__(self, stub: bool) -> None:
        self.stub = stub
        if stub:
            vllm_base.stub_platform()
        from vllm.model_executor.layers.quantization.utils import nvfp4_utils

        self.linear: Any = nvfp4_utils.select_nvfp4_linear_backend
        import vllm.model_executor.layers.fused_moe.oracle.nvfp4  # noqa: F401  (fails early)

    def ask(self, case: Case) -> Answer:
        if self.stub:
            vllm_base.set_capability(case.cc)
        with vllm_base.environment(case):
            args = vllm_base.engine_args(case.args)
            if case.family == "moe":
                name, _kernel = vllm_base.select_moe(args.moe_backend)
                return vllm_base.picked(case, name)
            if case.a16:
                raise LookupError("this adapter asks vLLM 0.18-0.23 for W4A4 layers only")
            return vllm_base.picked(case, str(self.linear().value))


def prepare(stub: bool) -> Session:
    """Import vLLM's selection code; raises what the import raises (ImportError, OSError)."""
    return Session(stub)
