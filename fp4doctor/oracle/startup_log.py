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
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fp4doctor.findings import Finding, Kind, Status
from fp4doctor.oracle.vllm_base import LINEAR_NAMES, MOE_NAMES

if TYPE_CHECKING:
    from fp4doctor.doctor import Report
    from fp4doctor.rules import Evaluation


@dataclass(frozen=True)
class Ran:
    """A kernel the log says the engine selected."""

    engine: str  # 'vllm' | 'sglang'
    family: str  # 'linear' | 'moe'
    engine_name: str  # the engine's own word: 'MarlinNvFp4LinearKernel', 'MARLIN', 'cutlass'
    line: int


@dataclass(frozen=True)
class KnownError:
    """A line that matches a known failure: what it means and what to do."""

    kind: str  # 'no_kernel_image' | 'refused_backend' | 'cudart_loader' | ...
    line: int
    text: str
    diagnosis: str
    fix: str


_VLLM_LINEAR = re.compile(r"Using (?:NvFp4LinearBackend\.)?(\w+) for NVFP4 GEMM")
_VLLM_MOE = re.compile(r"Using '?(\w+)'? NvFp4 MoE (?:LoRA )?backend")
_SGLANG = re.compile(
    r"""['"]?(fp4_gemm_runner_backend|moe_runner_backend)['"]?\s*[:=]\s*['"]([\w.-]+)['"]"""
)

_FIX_ENV = 'eval "$(fp4doctor env)"  # knobs checked against the engine\'s own selection code'
_ERRORS: tuple[tuple[str, re.Pattern[str], str, str], ...] = (
    (
        "no_kernel_image",
        re.compile(r"no kernel image is available for execution on the device"),
        "a compiled module (the engine's ops, FlashInfer's kernels or torch) carries no code for "
        "this GPU's architecture: the build's CUDA arch list left it out",
        "install the build for your CUDA and GPU (the official wheel), or rebuild with "
        "TORCH_CUDA_ARCH_LIST naming its compute capability; `fp4doctor check` names the module "
        "(host.compiled_for_gpu)",
    ),
    (
        "refused_backend",
        re.compile(
            r"(\w+) MoE (?:LoRA )?backend '(\w+)' does not support the deployment "
            r"configuration(?: since ([^\n]*?))?\.?$"
        ),
        "the MoE backend asked for (--moe-backend, or VLLM_USE_FLASHINFER_MOE_FP4 / "
        "VLLM_FLASHINFER_MOE_BACKEND) is refused by the engine on this GPU and configuration",
        _FIX_ENV,
    ),
    (
        "no_linear_kernel",
        re.compile(
            r"Failed to find a kernel that can implement the NVFP4 linear layer|"
            r"No NVFP4 GEMM backend selected|Forced NVFP4 kernel \w+ is not supported|"
            r"--linear-backend=\w+ was requested but no '\w+' kernel exists"
        ),
        "no NVFP4 linear kernel the engine was allowed to use runs here",
        _FIX_ENV,
    ),
    (
        "cudart_loader",
        re.compile(
            r"libcudart\.so(?:\.\d+)?: cannot open shared object file|Unable to load any "
            r"libcudart\.so|Multiple libcudart libraries found"
        ),
        "a CUDA runtime library could not be loaded as the package expects (a wheel for one CUDA "
        "major on an environment with another, or two runtimes visible to one process)",
        "install the package build for the CUDA runtime you have (torch's, `fp4doctor probe` "
        "shows it), or `pip install -U 'nvidia-cudnn-frontend>=1.25.0'` for the cuDNN "
        "frontend's loader; take a second runtime off LD_LIBRARY_PATH",
    ),
    (
        "cutedsl_moe_quantization",
        # The assertion's message has a newline before this part (a line of its own in a log).
        re.compile(r"FlashInfer CuteDSL MOE currently supports only"),
        "SGLang checks --moe-runner-backend flashinfer_cutedsl against --quantization before it "
        "reads the checkpoint's own (sglang/srt/server_args.py _handle_moe_kernel_config from "
        "0.5.11; sglang/srt/arg_groups/moe_hook.py from 0.5.19): without the flag it is None",
        "pass --quantization modelopt_fp4 with it (`fp4doctor env --prefer "
        "moe:flashinfer-cutedsl-moe` writes both), or use another --moe-runner-backend",
    ),
    (
        "flashinfer_missing",
        re.compile(r"No module named '?flashinfer'?"),
        "the engine's selection imports FlashInfer, which is not installed (vLLM 0.18's MoE "
        "selection imports it at module level whatever the GPU)",
        "pip install flashinfer-python (and flashinfer-cubin at the same version)",
    ),
)


def read(text: str) -> tuple[list[Ran], list[KnownError]]:
    """The kernels selected and the known errors, in the order the log has them."""
    ran: list[Ran] = []
    errors: list[KnownError] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if m := _VLLM_LINEAR.search(line):
            ran.append(Ran("vllm", "linear", m.group(1), number))
        if m := _VLLM_MOE.search(line):
            ran.append(Ran("vllm", "moe", m.group(1), number))
        if "server_args" in line:
            for key, value in _SGLANG.findall(line):
                family = "linear" if key.startswith("fp4") else "moe"
                ran.append(Ran("sglang", family, value, number))
        for kind, pattern, diagnosis, fix in _ERRORS:
            if pattern.search(line):
                errors.append(KnownError(kind, number, line.strip()[:300], diagnosis, fix))
    return ran, errors


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


def judge(text: str, report: Report) -> list[Finding]:
    """Findings for a log against fp4doctor's prediction for this host (or facts):
    `log.FAMILY` per kernel the log says ran (pass: what fp4doctor predicts; fail: another),
    `log.error.KIND` per known error, `log.none` when the log names no FP4 kernel at all."""
    ran, errors = read(text)
    out: list[Finding] = []
    parts = {p.family: p for p in report.families}
    for r in ran:
        part = parts.get(r.family)
        if part is None:
            continue
        evaluation, chosen = part.evaluation, part.resolution.chosen
        backend = backend_of(r) or _knob_backend(evaluation, r.engine_name)
        said = f"log line {r.line}: {r.engine} ran {backend or r.engine_name} ({r.engine_name})"
        own = evaluation.engine_auto
        if backend is not None and backend == chosen:
            out.append(
                Finding(
                    f"log.{r.family}",
                    Status.PASS,
                    f"{said}, as fp4doctor predicts",
                    backend=backend,
                    kind=Kind.ENGINE_PICK,
                    family=r.family,
                )
            )
        else:
            why = f"fp4doctor chooses {chosen or 'no backend'} on this host" + (
                f" (the engine's own pick as set: {own})" if own and own != chosen else ""
            )
            if backend is not None and not evaluation.valid(backend):
                why += f"; {backend} cannot run here"
            out.append(
                Finding(
                    f"log.{r.family}",
                    Status.FAIL,
                    f"{said}; {why}",
                    fix='eval "$(fp4doctor env)"',
                    backend=backend,
                    kind=Kind.ENGINE_PICK,
                    family=r.family,
                )
            )
    for e in errors:
        out.append(
            Finding(
                f"log.error.{e.kind}",
                Status.FAIL,
                f"log line {e.line}: {e.text!r}: {e.diagnosis}",
                fix=e.fix,
                kind=Kind.ENGINE,
            )
        )
    if not out:
        out.append(
            Finding(
                "log.none",
                Status.WARN,
                "the log names no NVFP4 kernel and no known error (is it the engine's "
                "start-up log, at INFO level?)",
                kind=Kind.ENGINE,
            )
        )
    return out


def _knob_backend(evaluation: Evaluation, value: str) -> str | None:
    """The backend a knob value of the era names ('auto': the engine's own pick)."""
    if value == "auto":
        return evaluation.engine_auto
    gpus = evaluation.facts.gpus
    cc = gpus[0].cc if gpus else None
    for knob in evaluation.era.knobs:
        backend = knob.backend_for(value, cc)  # the engine decides on its first GPU
        if backend is not None:
            return backend
    return None
