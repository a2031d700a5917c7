"""TensorRT-LLM's `trtllm-serve` options, from its source: its wheels are not on PyPI (they are on
NVIDIA's own index, profiles/index.json `without_wheel`), so no release's parser is extracted and
an option not listed here is named in the notes, not refused.

Read from NVIDIA/TensorRT-LLM tensorrt_llm/commands/serve.py (commit 00209af149e7, the
`serve` click command): each `@click.option` with its names and whether it is a flag
(`is_flag=True`). click takes `--name value` and `--name=value`, no prefix of a name.
"""

from __future__ import annotations

from fp4doctor.command.flagdata import Option

_VALUES = {
    "tokenizer": ("--tokenizer",),
    "custom_tokenizer": ("--custom_tokenizer",),
    "host": ("--host",),
    "port": ("--port",),
    "backend": ("--backend",),
    "custom_module_dirs": ("--custom_module_dirs",),
    "log_level": ("--log_level",),
    "max_beam_width": ("--max_beam_width",),
    "max_batch_size": ("--max_batch_size",),
    "max_num_tokens": ("--max_num_tokens",),
    "max_seq_len": ("--max_seq_len",),
    "tensor_parallel_size": ("--tensor_parallel_size", "--tp_size"),
    "pipeline_parallel_size": ("--pipeline_parallel_size", "--pp_size"),
    "context_parallel_size": ("--context_parallel_size", "--cp_size"),
    "moe_expert_parallel_size": ("--moe_expert_parallel_size", "--ep_size"),
    "moe_cluster_parallel_size": ("--moe_cluster_parallel_size", "--cluster_size"),
    "gpus_per_node": ("--gpus_per_node",),
    "free_gpu_memory_fraction": (
        "--free_gpu_memory_fraction",
        "--kv_cache_free_gpu_memory_fraction",
    ),
    "num_postprocess_workers": ("--num_postprocess_workers",),
    "revision": ("--revision",),
    "extra_llm_api_options": ("--config", "--extra_llm_api_options"),
    "reasoning_parser": ("--reasoning_parser",),
    "tool_parser": ("--tool_parser",),
    "metadata_server_config_file": ("--metadata_server_config_file",),
    "server_role": ("--server_role",),
    "otlp_traces_endpoint": ("--otlp_traces_endpoint",),
    "disagg_cluster_uri": ("--disagg_cluster_uri",),
    "media_io_kwargs": ("--media_io_kwargs",),
    "chat_template": ("--chat_template",),
}
_FLAGS = ("trust_remote_code", "fail_fast_on_attention_window_too_large", "enable_chunked_prefill")


def options() -> dict[str, Option]:
    """Every `trtllm-serve serve` option string -> its Option."""
    out = {
        name: Option(name=name, dest=dest, nargs=1)
        for dest, names in _VALUES.items()
        for name in names
    }
    for dest in _FLAGS:
        name = "--" + dest
        out[name] = Option(name=name, dest=dest, nargs=0, const=True)
    out["--help"] = Option(name="--help", dest="help", nargs=0, const=True)
    return out
