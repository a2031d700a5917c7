"""Each engine's parsed options (argparse dests) mapped to fp4doctor's fields (model.FIELDS).

One table per engine, dest -> field and how the value is read; the last option given wins, as in
argparse. Values worked out from several options (vLLM's EP size) are computed here, from the
engine's own rule, and their Setting names every flag they come from.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from fp4doctor.command.model import CommandError, Setting
from fp4doctor.command.reader import Given, Word, config_file

_HUMAN = re.compile(r"^(\d+(?:\.\d+)?)([kKmMgGtT])$")
_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def _int(label: str, g: Given) -> int:
    """argparse's `type=int`, and vLLM's human_readable_int ("8k" = 8000, "8K" = 8192)."""
    text = str(g.value).strip()
    try:
        return int(text)
    except ValueError:
        pass
    m = _HUMAN.match(text)
    if m:
        number, suffix = m.groups()
        return int(float(number) * _DECIMAL.get(suffix, 0) or float(number) * _BINARY[suffix])
    raise CommandError(f"{label}: argument {_written(g)}: invalid int value: {text!r}")


def _json(label: str, g: Given) -> Any:
    if isinstance(g.value, (dict, list)):
        return g.value
    try:
        return json.loads(str(g.value))
    except json.JSONDecodeError as e:
        raise CommandError(
            f"{label}: argument {_written(g)}: not valid JSON ({e.msg}): {g.value!r}"
        ) from None


def _json_object(label: str, g: Given) -> dict[str, Any]:
    value = _json(label, g)
    if not isinstance(value, dict):
        raise CommandError(f"{label}: argument {_written(g)}: expected a JSON object: {g.value!r}")
    return value


def _written(g: Given) -> str:
    return g.flag.split(" ", 1)[0].partition("=")[0]


def _bool(g: Given) -> bool:
    if isinstance(g.value, bool):
        return g.value
    return str(g.value).strip().lower() in ("1", "true", "yes", "on")


def _text(g: Given) -> str:
    return g.value if isinstance(g.value, str) else " ".join(map(str, g.value))


def _level(value: Any) -> int | str:
    text = str(value).strip()
    return int(text) if text.lstrip("-").isdigit() else text


class Fields:
    """The settings of one command, filled option by option (the last one given wins)."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.settings: dict[str, Setting] = {}
        self.notes: list[str] = []

    def set(self, name: str, value: Any, g: Given, flag: str | None = None) -> None:
        self.settings[name] = Setting(value, flag or g.flag, g.source)

    def setting(self, name: str) -> Setting | None:
        return self.settings.get(name)


Handler = Callable[[Fields, Given], None]


def _field(name: str, read: Callable[[Fields, Given], Any]) -> Handler:
    def handle(f: Fields, g: Given) -> None:
        f.set(name, read(f, g), g)

    return handle


def _as_int(name: str) -> Handler:
    return _field(name, lambda f, g: _int(f.label, g))


def _as_text(name: str) -> Handler:
    return _field(name, lambda f, g: _text(g))


def _as_bool(name: str) -> Handler:
    return _field(name, lambda f, g: _bool(g))


def _constant(name: str, value: Any) -> Handler:
    """A switch that sets `name` to `value` when given (a false one sets nothing)."""

    def handle(f: Fields, g: Given) -> None:
        if _bool(g):
            f.set(name, value, g)

    return handle


def _both(*handlers: Handler) -> Handler:
    def handle(f: Fields, g: Given) -> None:
        for h in handlers:
            h(f, g)

    return handle


# -- vLLM --------------------------------------------------------------------------------------


def _vllm_compilation(f: Fields, g: Given) -> None:
    """--compilation-config (and `-O` before 0.12): a JSON object, or a bare level (`-O 3`
    before 0.10: CompilationConfig.from_cli). The last one given is the whole value (argparse),
    read in _vllm_compilation_fields."""
    text = str(g.value).strip()
    if not isinstance(g.value, dict) and text.lstrip("-").isdigit():
        f.set("_compilation", {"level": int(text)}, g)
    else:
        f.set("_compilation", _json_object(f.label, g), g)


def _vllm_compilation_fields(f: Fields) -> None:
    """compilation_level: the compilation config's `level` (`mode` from 0.11) when it has one,
    else --optimization-level (0.12+: `-O N`); cuda_graphs: False with --enforce-eager (eager
    mode captures no CUDA graph), else from the compilation config's `cudagraph_mode`."""
    config = f.settings.pop("_compilation", None)
    values = config.value if config is not None else {}
    for key in ("level", "mode"):
        if config is not None and values.get(key) is not None:
            f.settings["compilation_level"] = Setting(_level(values[key]), config.flag,
                                                      config.source)  # fmt: skip
    eager = f.settings.get("enforce_eager")
    if eager is not None and eager.value:
        f.settings["cuda_graphs"] = Setting(False, eager.flag, eager.source)
    elif config is not None and values.get("cudagraph_mode") is not None:
        mode = str(values["cudagraph_mode"]).upper()
        f.settings["cuda_graphs"] = Setting(mode not in ("NONE", "0"), config.flag, config.source)


def _vllm_kernel(f: Fields, g: Given) -> None:
    """--kernel-config (0.16+): kept whole; what it says of autotune and the backends is
    weighed against their own flags in vllm_derived."""
    f.set("kernel_config", _json_object(f.label, g), g)


VLLM: Mapping[str, Handler] = {
    "model": _as_text("model"),
    "tensor_parallel_size": _as_int("tp"),
    "pipeline_parallel_size": _as_int("pp"),
    "data_parallel_size": _as_int("dp"),
    "prefill_context_parallel_size": _as_int("_pcp"),
    "enable_expert_parallel": _as_bool("expert_parallel"),
    "linear_backend": _as_text("_linear_backend"),
    "moe_backend": _as_text("_moe_backend"),
    "all2all_backend": _as_text("all2all_backend"),
    "enforce_eager": _as_bool("enforce_eager"),
    "optimization_level": _field("compilation_level", lambda f, g: _level(g.value)),
    "compilation_config": _vllm_compilation,
    "kernel_config": _vllm_kernel,
    "enable_flashinfer_autotune": _as_bool("_autotune"),
    "dtype": _as_text("dtype"),
    "quantization": _as_text("quantization"),
    "max_num_batched_tokens": _as_int("max_num_batched_tokens"),
    "hf_overrides": _field("hf_overrides", lambda f, g: _json_object(f.label, g)),
}


def _vllm_kernel_fields(f: Fields) -> None:
    """EngineArgs.create_engine_config (vllm/engine/arg_utils.py, 0.16.0-0.34.0): the kernel
    config is --kernel-config, then `if self.enable_flashinfer_autotune is not None` it takes
    that flag (and raises "enable_flashinfer_autotune and kernel_config.enable_flashinfer_autotune
    are mutually exclusive" when both are set), `if self.moe_backend != "auto"` and
    `if self.linear_backend != "auto"` the backend flags."""
    kernel = f.settings.get("kernel_config")
    config = kernel.value if kernel is not None else {}
    for name in ("linear_backend", "moe_backend"):
        own = f.settings.pop("_" + name, None)
        inside = config.get(name)
        if own is not None and (own.value != "auto" or inside is None):
            f.settings[name] = own
        elif inside is not None and kernel is not None:
            value = str(inside).lower().replace("-", "_")
            f.settings[name] = Setting(value, kernel.flag, kernel.source)
    own = f.settings.pop("_autotune", None)
    inside = config.get("enable_flashinfer_autotune")
    if own is not None and inside is not None:
        raise CommandError(
            f"{f.label}: {own.flag} and {kernel.flag if kernel else '--kernel-config'}: "
            "enable_flashinfer_autotune and kernel_config.enable_flashinfer_autotune are "
            "mutually exclusive"
        )
    if own is not None:
        f.settings["autotune"] = own
    elif inside is not None and kernel is not None:
        f.settings["autotune"] = Setting(bool(inside), kernel.flag, kernel.source)


def vllm_derived(f: Fields) -> None:
    """The kernel-config and compilation fields, then vLLM's EP size: with
    --enable-expert-parallel the experts are split over the TP x DP ranks
    (vllm/model_executor/layers/fused_moe/layer.py 0.8.0-0.9.1: `self.ep_size =
    self.tp_size * self.dp_size`; FusedMoEParallelConfig.make in fused_moe/config.py from
    0.9.2, x PCP from 0.12.0: `use_ep = dp_size_ * pcp_size_ * tp_size_ > 1 and
    enable_expert_parallel`, then `ep_size = tp_size` after flattening TP across DP and PCP).
    Without it EP is 1, and it is not set here."""
    _vllm_kernel_fields(f)
    _vllm_compilation_fields(f)
    pcp = f.settings.pop("_pcp", None)
    ep = f.settings.get("expert_parallel")
    if ep is None or not ep.value:
        return
    parts = [f.settings.get("tp"), f.settings.get("dp"), pcp]
    size = 1
    for p in parts:
        size *= p.value if p is not None else 1
    flags = " ".join(s.flag for s in [ep, *parts] if s is not None)
    sources = {s.source for s in [ep, *parts] if s is not None}
    f.settings["ep"] = Setting(size, flags, ep.source if len(sources) == 1 else ", ".join(sources))


# -- SGLang ------------------------------------------------------------------------------------


def _sglang_ep_moe(f: Fields, g: Given) -> None:
    """--enable-ep-moe (to 0.5.4): `self.ep_size = self.tp_size` (ServerArgs.__post_init__)."""
    if _bool(g):
        f.set("expert_parallel", True, g)
        f.set("_ep_from_tp", True, g)


def _sglang_deepep(f: Fields, g: Given) -> None:
    """--enable-deepep-moe (to 0.5.4): the DeepEP all-to-all, `self.ep_size = self.tp_size`."""
    if _bool(g):
        f.set("all2all_backend", "deepep", g)
        f.set("expert_parallel", True, g)
        f.set("_ep_from_tp", True, g)


def _sglang_ep_size(f: Fields, g: Given) -> None:
    size = _int(f.label, g)
    f.set("ep", size, g)
    f.set("expert_parallel", size > 1, g)


def _sglang_cuda_graph_decode(f: Fields, g: Given) -> None:
    """--cuda-graph-backend-decode (0.5.14+): `disabled` runs the decode steps without CUDA
    graphs (0.5.23 deprecates --disable-cuda-graph for it)."""
    f.set("cuda_graphs", _text(g).lower() != "disabled", g)


SGLANG: Mapping[str, Handler] = {
    "model_path": _as_text("model"),
    "tp_size": _as_int("tp"),
    "tensor_parallel_size": _as_int("tp"),
    "pp_size": _as_int("pp"),
    "pipeline_parallel_size": _as_int("pp"),
    "dp_size": _as_int("dp"),
    "data_parallel_size": _as_int("dp"),
    "ep_size": _sglang_ep_size,
    "expert_parallel_size": _sglang_ep_size,
    "enable_ep_moe": _sglang_ep_moe,
    "enable_deepep_moe": _sglang_deepep,
    "fp4_gemm_runner_backend": _as_text("linear_backend"),
    "fp4_gemm_backend": _as_text("linear_backend"),
    "moe_runner_backend": _as_text("moe_backend"),
    # The switches --moe-runner-backend replaced (ServerArgs.__post_init__ maps them onto it):
    # --enable-flashinfer-moe 0.4.8-0.4.9.post4 (FlashInfer's CUTLASS MoE for modelopt_fp4),
    # --enable-flashinfer-cutlass-moe / --enable-flashinfer-trtllm-moe 0.4.9.post5-0.5.4.
    "enable_flashinfer_moe": _constant("moe_backend", "flashinfer_cutlass"),
    "enable_flashinfer_cutlass_moe": _constant("moe_backend", "flashinfer_cutlass"),
    "enable_flashinfer_trtllm_moe": _constant("moe_backend", "flashinfer_trtllm"),
    "moe_a2a_backend": _as_text("all2all_backend"),
    "disable_cuda_graph": _constant("cuda_graphs", False),
    "cuda_graph_backend_decode": _sglang_cuda_graph_decode,
    # 0.5.6-0.5.6.post2: autotune only with --enable-flashinfer-autotune (default off);
    # from 0.5.7 on by default, off with --disable-flashinfer-autotune.
    "enable_flashinfer_autotune": _constant("autotune", True),
    "disable_flashinfer_autotune": _constant("autotune", False),
    "dtype": _as_text("dtype"),
    "quantization": _as_text("quantization"),
    "chunked_prefill_size": _as_int("chunked_prefill_size"),
    "json_model_override_args": _field("hf_overrides", lambda f, g: _json_object(f.label, g)),
}


def sglang_derived(f: Fields) -> None:
    from_tp = f.settings.pop("_ep_from_tp", None)
    if from_tp is not None and "ep" not in f.settings:
        tp = f.settings.get("tp")
        size = tp.value if tp is not None else 1
        flag = from_tp.flag + (f" {tp.flag}" if tp is not None else "")
        f.settings["ep"] = Setting(size, flag, from_tp.source)


# -- TensorRT-LLM ------------------------------------------------------------------------------


def _trtllm_options_file(f: Fields, g: Given) -> None:
    f.set("_extra", _text(g), g)


def trtllm_derived(f: Fields) -> None:
    """--extra_llm_api_options / --config FILE.yaml, read after every flag: serve.py merges it
    over them (`update_llm_args_with_extra_dict`), so its keys win. The LLM API keys read
    (tensorrt_llm/llmapi/llm_args.py: tensor_parallel_size, pipeline_parallel_size,
    moe_expert_parallel_size, moe_config.backend, cuda_graph_config, enable_autotuner,
    max_num_tokens)."""
    extra = f.settings.pop("_extra", None)
    if extra is None:
        return
    got = config_file([Word("--config", extra.source), Word(extra.value, extra.source)], f.label)
    assert got is not None
    path, data, _ = got
    source = f"{extra.flag.split(' ', 1)[0].partition('=')[0]} {path}"

    def put(name: str, value: Any, key: str) -> None:
        f.settings[name] = Setting(value, key, source)

    for key, name in (("tensor_parallel_size", "tp"), ("pipeline_parallel_size", "pp"),
                      ("moe_expert_parallel_size", "ep"),
                      ("max_num_tokens", "max_num_batched_tokens")):  # fmt: skip
        if isinstance(data.get(key), int):
            put(name, data[key], f"{key}: {data[key]}")
    moe = data.get("moe_config")
    if isinstance(moe, dict) and moe.get("backend") is not None:
        put("moe_backend", str(moe["backend"]), f"moe_config.backend: {moe['backend']}")
    if "cuda_graph_config" in data:
        put("cuda_graphs", data["cuda_graph_config"] is not None, "cuda_graph_config")
    if isinstance(data.get("enable_autotuner"), bool):
        put("autotune", data["enable_autotuner"], f"enable_autotuner: {data['enable_autotuner']}")


TRTLLM: Mapping[str, Handler] = {
    "model": _as_text("model"),
    "tensor_parallel_size": _as_int("tp"),
    "pipeline_parallel_size": _as_int("pp"),
    "moe_expert_parallel_size": _as_int("ep"),
    "max_num_tokens": _as_int("max_num_batched_tokens"),
    "extra_llm_api_options": _trtllm_options_file,
}

HANDLERS: Mapping[str, Mapping[str, Handler]] = {
    "vllm": VLLM,
    "sglang": SGLANG,
    "trtllm": TRTLLM,
}
DERIVED: Mapping[str, Callable[[Fields], None]] = {
    "vllm": vllm_derived,
    "sglang": sglang_derived,
    "trtllm": trtllm_derived,
}
