"""What an engine really ran, read from its start-up log, and the known errors in it.

Pure. The lines read, as the released wheels write them:
- vLLM's linear GEMM: 'Using NvFp4LinearBackend.MARLIN for NVFP4 GEMM' (0.18-0.23,
  vllm/model_executor/layers/quantization/utils/nvfp4_utils.py select_nvfp4_linear_backend:
  logger.info_once(f"Using {backend} for NVFP4 GEMM")), 'Using MarlinNvFp4LinearKernel for
  NVFP4 GEMM' (0.24-0.34, vllm/model_executor/kernels/linear/__init__.py
  init_nvfp4_linear_kernel: logger.info_once("Using %s for NVFP4 GEMM", kernel_cls.__name__));
- vLLM's MoE: "Using 'MARLIN' NvFp4 MoE backend out of potential backends: [...]" (0.18-0.33,
  vllm/model_executor/layers/fused_moe/oracle/nvfp4.py _make_log_backend / make_log_backend),
  'Using MARLIN NvFp4 MoE backend out of potential backends: [...]' (0.34,
  vllm/model_executor/layers/fused_moe/oracle/base.py make_log_backend);
- vLLM's refusal: "NvFp4 MoE backend 'VLLM_CUTLASS' does not support the deployment
  configuration since ..." (the same two files, make_log_unsupported / _make_log_unsupported);
- SGLang: the 'server_args=...' line of every launch (sglang 0.5.23,
  sglang/srt/entrypoints/engine.py: logger.info(f"server_args={...resolved_dict()}")), whose
  'fp4_gemm_runner_backend' and 'moe_runner_backend' are the backends it runs with.

The errors a log holds are read by fp4doctor/logs (known ones from profiles/signatures.yaml);
fp4doctor.logs.reading.read_text gives both for a log already in memory.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fp4doctor.oracle.vllm_base import LINEAR_NAMES, MOE_NAMES
from fp4doctor.selection.engine import engine_auto

if TYPE_CHECKING:
    from fp4doctor.rules import Evaluation


@dataclass(frozen=True)
class Ran:
    """A kernel the log says the engine selected."""

    engine: str  # 'vllm' | 'sglang'
    family: str  # 'linear' | 'moe'
    engine_name: str  # the engine's own word: 'MarlinNvFp4LinearKernel', 'MARLIN', 'cutlass'
    line: int


_VLLM_LINEAR = (
    "for NVFP4 GEMM",
    re.compile(r"Using (?:NvFp4LinearBackend\.)?(\w{1,100}) for NVFP4 GEMM"),
)
_VLLM_MOE = ("NvFp4 MoE ", re.compile(r"Using '?(\w{1,100})'? NvFp4 MoE (?:LoRA )?backend"))
_SGLANG = re.compile(
    r"""['"]?(fp4_gemm_runner_backend|moe_runner_backend)['"]?\s{0,8}[:=]\s{0,8}['"]([\w.-]{1,100})['"]"""
)


def kernels(text: str, number: int) -> list[Ran]:
    """The kernels one log line (prefixes taken off) says the engine selected. Each pattern is
    tried only where its literal is in the line, and repeats a bounded number of times: time
    linear in the line's length."""
    out: list[Ran] = []
    guard, pattern = _VLLM_LINEAR
    if guard in text and (m := pattern.search(text)):
        out.append(Ran("vllm", "linear", m.group(1), number))
    guard, pattern = _VLLM_MOE
    if guard in text and (m := pattern.search(text)):
        out.append(Ran("vllm", "moe", m.group(1), number))
    if "server_args" in text:
        for key, value in _SGLANG.findall(text):
            family = "linear" if key.startswith("fp4") else "moe"
            out.append(Ran("sglang", family, value, number))
    return out


_SGLANG_ARG = re.compile(
    r"""['"](quantization|fp4_gemm_runner_backend|moe_runner_backend)['"]\s{0,8}[:=]\s{0,8}"""
    r"""(?:['"]([\w.-]{1,100})['"]|None)"""
)


def sglang_args(text: str) -> dict[str, str]:
    """The resolved arguments of SGLang's server_args line that say which FP4 kernels run."""
    return {k: v for k, v in _SGLANG_ARG.findall(text) if v}


def backend_of(ran: Ran) -> str | None:
    """fp4doctor's name for what ran, None when its rules know no such kernel (SGLang's words
    are its knob values: `knob_backend` maps them with the profile)."""
    if ran.engine != "vllm":
        return None
    if ran.family == "moe":
        return MOE_NAMES.get(ran.engine_name)
    name = ran.engine_name
    if name.isupper():  # an NvFp4LinearBackend member (0.18-0.23): VLLM_CUTLASS, FLASHINFER_CUDNN
        name = name.lower().replace("_", "-").removeprefix("vllm-")
    return LINEAR_NAMES.get(name)


def knob_backend(evaluation: Evaluation, value: str) -> str | None:
    """The backend a knob value of the era names ('auto': the engine's own pick)."""
    if value == "auto":
        return engine_auto(evaluation)
    gpus = evaluation.facts.gpus
    cc = gpus[0].cc if gpus else None
    for knob in evaluation.era.knobs:
        backend = knob.backend_for(value, cc)  # the engine decides on its first GPU
        if backend is not None:
            return backend
    return None
