"""`env --log-kernels`: the settings that make an engine's start-up log name every NVFP4 kernel
it runs, per layer class, and why it passed the others over (what `verify-log` reads).

Read from the released wheels:
- vLLM 0.18-0.34: the NVFP4 GEMM and MoE backend lines are INFO
  (kernels/linear/__init__.py `logger.info_once("Using %s for NVFP4 GEMM", ...)`;
  fused_moe/oracle/nvfp4.py, 0.34 oracle/base.py `make_log_backend`), each MoE backend skipped
  is DEBUG (`logger.debug_once(make_log_unsupported(...))`), and the module tree with each
  module's quant scheme needs VLLM_LOG_MODEL_INSPECTION=1
  (model_executor/model_loader/base_loader.py `log_model_inspection`, vllm/model_inspection.py).
- SGLang 0.5.16-0.5.23: `server_args=...` is INFO (sglang/srt/entrypoints/engine.py), the
  default --log-level.
"""

from __future__ import annotations

from dataclasses import replace

from packaging.version import InvalidVersion, Version

from fp4doctor.emit.exports import Exports

VLLM_FIRST = Version("0.18.0")  # the first release read
VLLM_ENV = (("VLLM_LOGGING_LEVEL", "DEBUG"), ("VLLM_LOG_MODEL_INSPECTION", "1"))
SGLANG_ARGS = ("--log-level", "info")


def with_log_kernels(
    exports: Exports, *, target: str, engine_version: str | None, args_variable: str | None
) -> tuple[Exports, list[str]]:
    """`exports` with the logging settings added, and the notes that say what they cost."""
    set_env = [(n, v) for n, v in exports.set if n not in dict(VLLM_ENV)]
    notes: list[str] = []
    if target == "vllm":
        try:
            old = engine_version is not None and Version(engine_version) < VLLM_FIRST
        except InvalidVersion:
            old = False
        set_env += list(VLLM_ENV)
        notes.append(
            "log kernels: VLLM_LOGGING_LEVEL=DEBUG logs each NVFP4 MoE backend vLLM passes over "
            "and why (INFO, the default, already names the kernels; DEBUG is verbose); "
            "VLLM_LOG_MODEL_INSPECTION=1 logs the module tree with each layer's quant scheme; "
            "`fp4doctor verify-log LOG --model M` joins them per layer class"
        )
        if old:
            notes.append(f"log kernels: read for vLLM {VLLM_FIRST} and later only")
    elif target == "sglang" and args_variable:
        current = dict(set_env).get(args_variable)
        words = [w for w in (current or "").split(" ") if w]
        if "--log-level" not in words:
            words += list(SGLANG_ARGS)
        set_env = [(n, v) for n, v in set_env if n != args_variable] + [
            (args_variable, " ".join(words))
        ]
        notes.append(
            "log kernels: SGLang logs its resolved server_args (the FP4 GEMM and MoE runner "
            f"backends) at --log-level info; pass ${args_variable}"
        )
    else:
        notes.append(f"log kernels: no logging setting is known for {target}: nothing added")
    lists = exports.lists
    if target == "sglang" and args_variable and args_variable not in lists:
        lists = (*lists, args_variable)
    return replace(exports, set=tuple(set_env), lists=lists), notes
