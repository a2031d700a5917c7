"""What a read command line is: the engine it starts, the model, and each field it sets with the
flag that set it. Plain frozen data; `fp4doctor.command.parse` builds it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

# Every field a command line can set, with the type of its value (the module docstring of
# fp4doctor.command says what each means per engine).
FIELDS: Mapping[str, str] = MappingProxyType(
    {
        "model": "str",
        "tp": "int",
        "pp": "int",
        "dp": "int",
        "ep": "int",
        "expert_parallel": "bool",
        "linear_backend": "str",
        "moe_backend": "str",
        "all2all_backend": "str",
        "enforce_eager": "bool",
        "compilation_level": "int | str",
        "cuda_graphs": "bool",
        "kernel_config": "dict",
        "autotune": "bool",
        "dtype": "str",
        "quantization": "str",
        "max_num_batched_tokens": "int",
        "chunked_prefill_size": "int",
        "hf_overrides": "dict",
    }
)
COMMAND_LINE = "command line"


class CommandError(ValueError):
    """The engine would refuse this command line (or fp4doctor cannot read it): a usage error,
    one line that names the flag, the release and what the release accepts."""


@dataclass(frozen=True)
class Setting:
    """One field's value and where it was set.

    `flag` is the words that set it, as given (`--tensor-parallel-size 4`,
    `--moe-backend=cutlass`, `-tp 2`; for a value worked out from others, such as vLLM's EP size,
    the flags it comes from); `source` is where those words were: `"command line"`, the
    environment variable that carried them (`"FP4DOCTOR_VLLM_ARGS"`) or the config file
    (`"--config serve.yaml"`).
    """

    value: Any
    flag: str
    source: str = COMMAND_LINE

    def describe(self) -> str:
        """`set by --tensor-parallel-size 4`, `set by --moe-backend=cutlass in
        FP4DOCTOR_VLLM_ARGS`."""
        where = "" if self.source == COMMAND_LINE else f" in {self.source}"
        return f"set by {self.flag}{where}"


@dataclass(frozen=True)
class EngineCommand:
    """An engine's command line as read: only what it sets (an engine default is not filled
    in here).

    - `target`: `"vllm"`, `"sglang"` or `"trtllm"`, from the command itself.
    - `argv`: the words given (the environment's args variable not included).
    - `model`: the model path or name (`vllm serve MODEL`, `--model`, `--model-path`), or None.
    - `settings`: field name (FIELDS) -> Setting, for each field the command sets.
    - `release`: the engine release whose flags read it (None for TensorRT-LLM: no flag data).
    - `environment`: `NAME=value` words written before the command (`VAR=1 vllm serve ...`).
    - `notes`: what the reader could not check or assumed, one line each (for stderr).
    """

    target: str
    argv: tuple[str, ...]
    model: str | None
    settings: Mapping[str, Setting] = field(default_factory=lambda: MappingProxyType({}))
    release: str | None = None
    environment: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    notes: tuple[str, ...] = ()

    def get(self, name: str) -> Setting | None:
        """The field's Setting, or None when the command does not set it."""
        if name not in FIELDS:
            raise KeyError(f"no field {name!r}; fields: {', '.join(FIELDS)}")
        return self.settings.get(name)

    def value(self, name: str, default: Any = None) -> Any:
        """The field's value, or `default` when the command does not set it."""
        got = self.get(name)
        return default if got is None else got.value
