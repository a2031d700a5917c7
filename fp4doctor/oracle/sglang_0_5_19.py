"""SGLang 0.5.19 and newer (read in the 0.5.19 and 0.5.23 wheels): the arguments are resolved
by `run_resolution_pipeline` (sglang/srt/arg_groups/pipeline.py, the per-model overrides of
sglang/srt/arg_groups/model_overrides/ among its steps) and published process-wide with
`publish(server_args, role="scheduler")` (sglang/srt/runtime_context.py; 0.5.23 adds the
spawn `ranks`); the scheduler then calls `initialize_moe_config()` and
`initialize_fp4_gemm_config()`, which read the published configuration
(sglang/srt/managers/scheduler.py).

Worker side only (torch and SGLang are imported here)."""

from __future__ import annotations

from typing import Any

from fp4doctor.oracle import sglang_base


class Session(sglang_base.Session):
    def publish(self, server_args: Any) -> None:
        import inspect

        from sglang.srt import runtime_context
        from sglang.srt.layers.moe import initialize_moe_config

        placed: dict[str, Any] = {}
        if "ranks" in inspect.signature(runtime_context.publish).parameters:  # 0.5.23: a rank
            placed["ranks"] = runtime_context.SpawnRanks(world_rank=0, dp_rank=None, gpu_id=0)
        runtime_context.publish(server_args, role="scheduler", **placed)
        initialize_moe_config()
        self.fp4.initialize_fp4_gemm_config()
