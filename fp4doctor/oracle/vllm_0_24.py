"""vLLM 0.24.0 and newer (read in the 0.24.0, 0.33.0 and 0.34.0 wheels): the NVFP4 linear
kernel is `init_nvfp4_linear_kernel(use_a16)` in vllm/model_executor/kernels/linear/__init__.py
(`--linear-backend` through the current VllmConfig's kernel_config, `VLLM_DISABLED_KERNELS`,
`VLLM_BATCH_INVARIANT`, then each kernel's `is_supported` in `_POSSIBLE_NVFP4_KERNELS` order),
logged as `Using <KernelClass> for NVFP4 GEMM`. `--linear-backend` and `--moe-backend` reach the
kernel config as vLLM's `EngineArgs.create_engine_config` copies them (vllm/engine/arg_utils.py:
'if self.moe_backend != "auto": kernel_config.moe_backend = self.moe_backend', the same for
linear_backend). The MoE backend is `select_nvfp4_moe_backend` (vllm_base).

Worker side only (torch and vLLM are imported here)."""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from typing import Any

from fp4doctor.oracle import vllm_base
from fp4doctor.oracle.answers import Case


class Session(vllm_base.Session):
    def load(self) -> None:
        from vllm.config import VllmConfig, set_current_vllm_config
        from vllm.model_executor.kernels import linear

        self.init_kernel: Any = linear.init_nvfp4_linear_kernel
        self.vllm_config: Any = VllmConfig
        self.current: Any = set_current_vllm_config

    @contextlib.contextmanager
    def configured(self, args: Any) -> Iterator[Any]:
        kernel_config = copy.deepcopy(args.kernel_config)
        for name in ("moe_backend", "linear_backend"):
            if getattr(args, name, "auto") != "auto":
                setattr(kernel_config, name, getattr(args, name))
        with self.current(self.vllm_config(kernel_config=kernel_config)):
            yield kernel_config

    def linear(self, case: Case) -> str:
        return type(self.init_kernel(use_a16=case.a16)).__name__
