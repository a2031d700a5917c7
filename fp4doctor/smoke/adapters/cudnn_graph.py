"""cuDNN directly: cudnn-frontend's block_scale_dequantize + matmul graph, executed for real.

The graph FlashInfer's cudnn backend builds (`build_cudnn_gemm_fp4_graph`; reference
flashinfer-cudnn-fp4.md §1.5, §5.1), without FlashInfer, so a cuDNN refusal can be told
from a FlashInfer one. FP4_E2M1 operands `[1, m, k]` / `[1, k, n]` (the weight column-major),
FP8_E4M3 scales in the F8_128x4 reordering, FLOAT compute, a FLOAT alpha multiply, bf16 out.

On Hopper the library refuses it while creating plans ("FORT_NATIVE_10X engine is only
supported since Blackwell architecture", reference h200-baseline-probe.json): that becomes
status `fail`, "cuDNN refused the NVFP4 graph: <the telling line>".
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from fp4doctor.facts import cudnn_version_text
from fp4doctor.smoke.adapters import Refused, Unavailable
from fp4doctor.smoke.cases import Case
from fp4doctor.smoke.errors import summarize

_BUILD_STEPS = ("validate", "build_operation_graph", "create_execution_plans", "check_support")


@dataclass(frozen=True)
class CudnnGraph:
    name: str = "cudnn-graph"
    supports_cpu: bool = False

    def load(self) -> str:
        if importlib.util.find_spec("cudnn") is None:
            raise Unavailable("nvidia-cudnn-frontend is not installed")
        cudnn = importlib.import_module("cudnn")
        backend = cudnn_version_text(int(cudnn.backend_version()))
        return f"cudnn-frontend {getattr(cudnn, '__version__', '?')}, cuDNN {backend}"

    def bind(self, case: Case, out: torch.Tensor) -> Callable[[], object]:
        cudnn: Any = importlib.import_module("cudnn")
        m, n, k = case.m, case.n, case.k
        sa, sb = case.a.scales_128x4().view(torch.uint8), case.b.scales_128x4().view(torch.uint8)
        (mp, kp), np_ = sa.shape, sb.shape[0]
        dt = cudnn.data_type

        handle = cudnn.create_handle()
        cudnn.set_stream(handle, torch.cuda.current_stream(out.device).cuda_stream)
        graph = cudnn.pygraph(handle=handle)
        a_t = graph.tensor(name="a", dim=(1, m, k), stride=(m * k, k, 1), data_type=dt.FP4_E2M1)
        b_t = graph.tensor(name="b", dim=(1, k, n), stride=(k * n, 1, k), data_type=dt.FP4_E2M1)
        sa_t = graph.tensor(
            name="sa",
            dim=(1, mp, kp),
            stride=(mp * kp, kp, 1),
            data_type=dt.FP8_E4M3,
            reordering_type=cudnn.tensor_reordering.F8_128x4,
        )
        sb_t = graph.tensor(
            name="sb",
            dim=(1, kp, np_),
            stride=(kp * np_, 1, kp),
            data_type=dt.FP8_E4M3,
            reordering_type=cudnn.tensor_reordering.F8_128x4,
        )
        alpha_t = graph.tensor(name="alpha", dim=(1, 1, 1), stride=(1, 1, 1), data_type=dt.FLOAT)
        da = graph.block_scale_dequantize(a_t, sa_t, block_size=[1, 16], name="dequant_a")
        da.set_data_type(dt.FLOAT)
        db = graph.block_scale_dequantize(b_t, sb_t, block_size=[16, 1], name="dequant_b")
        db.set_data_type(dt.FLOAT)
        c = graph.matmul(da, db, compute_data_type=dt.FLOAT, name="gemm")
        c.set_data_type(dt.FLOAT)
        c_t = graph.mul(a=c, b=alpha_t, compute_data_type=dt.FLOAT, name="alpha_mul")
        c_t.set_output(True).set_data_type(dt.BFLOAT16)

        step = "validate"
        try:
            for step in _BUILD_STEPS:
                if step == "create_execution_plans":
                    graph.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
                else:
                    getattr(graph, step)()
            step = "build_plans"
            graph.build_plans()
        except Exception as exc:
            reason, text = summarize(exc)
            raise Refused(f"cuDNN refused the NVFP4 graph ({step}): {reason}", text) from exc

        fp4 = getattr(torch, "float4_e2m1fn_x2", torch.uint8)
        alpha = torch.tensor([case.alpha], dtype=torch.float32, device=out.device)
        variant_pack = {
            a_t: case.a.packed.view(fp4),
            b_t: case.b.packed.view(fp4),  # [n, k/2] row-major is [k, n] column-major
            sa_t: sa,
            sb_t: sb,
            alpha_t: alpha,
            c_t: out,
        }
        workspace = torch.empty(
            max(int(graph.get_workspace_size()), 1), dtype=torch.uint8, device=out.device
        )

        def call() -> object:
            graph.execute(variant_pack, workspace, handle=handle)
            return out

        return call


ADAPTER = CudnnGraph()
