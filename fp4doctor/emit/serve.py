"""How each engine's server is started, for the usage lines `env` prints and the headers of the
files `config` writes (MODEL stands for the model)."""

from __future__ import annotations

SERVE = {
    "vllm": "vllm serve MODEL",
    "sglang": "python -m sglang.launch_server --model-path MODEL",
    "trtllm": "trtllm-serve MODEL",
}


def serve_command(target: str) -> str | None:
    """The command line that starts `target`'s server, MODEL standing for the model."""
    return SERVE.get(target)
