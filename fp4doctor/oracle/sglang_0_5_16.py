"""SGLang 0.5.16 to 0.5.18 (read in the 0.5.16 wheel): `ServerArgs.__post_init__` resolves the
arguments (its per-model adjustments included) on the record itself, and the scheduler hands
it to `initialize_moe_config(server_args)` (sglang/srt/layers/moe/utils.py) and
`initialize_fp4_gemm_config(server_args)` (sglang/srt/layers/quantization/fp4_utils.py).

Worker side only (torch and SGLang are imported here)."""

from __future__ import annotations

from typing import Any

from fp4doctor.oracle import sglang_base


class Session(sglang_base.Session):
    def publish(self, server_args: Any) -> None:
        from sglang.srt.layers.moe import initialize_moe_config

        initialize_moe_config(server_args)
        self.fp4.initialize_fp4_gemm_config(server_args)
