"""Config files in the engines' own formats: vLLM's ``--config`` YAML, TensorRT-LLM's options YAML.

Values go through ``yaml.safe_dump``, which quotes whatever YAML would otherwise read as
another type or as syntax (``yes``, ``1.0``, ``null``, ``: ``, ``#``...). An env file for the
engines that take environment variables only is the dotenv format (`fp4doctor.emit.emit`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import yaml

from fp4doctor.emit.exports import EmitError, check_value

_LONG_OPTION = re.compile(r"--([A-Za-z0-9][A-Za-z0-9_-]*)")
_KEY_SEGMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

_VLLM_HEADER = (
    "# Written by fp4doctor. Use: vllm serve MODEL --config FILE\n"
    "# (keys are vllm serve options without the leading --)\n"
)
_TRTLLM_HEADER = (
    "# Written by fp4doctor. Use: trtllm-serve MODEL --config FILE\n"
    "# (older releases: --extra_llm_api_options FILE)\n"
)


def _dump(data: Mapping[str, object]) -> str:
    # Block style, keys in the order given, no line folding of long strings.
    return yaml.safe_dump(
        dict(data),
        default_flow_style=False,
        sort_keys=False,
        allow_unicode=False,  # non-ASCII as escapes: a raw NEL or LS would read as a line break
        width=1_000_000,
    )


def render_vllm_yaml(cli_args: Sequence[tuple[str, str]]) -> str:
    """vLLM ``--config`` YAML from ``(--option, value)`` pairs.

    vLLM turns each key back into ``--key value``, so ``("--linear-backend",
    "flashinfer_cudnn")`` becomes ``linear-backend: flashinfer_cudnn``. Raises EmitError for
    an option that is not a long option, an option given twice, or a value that is not text
    a command line can hold.
    """
    options: dict[str, str] = {}
    for option, value in cli_args:
        match = _LONG_OPTION.fullmatch(option) if isinstance(option, str) else None
        if match is None:
            raise EmitError(
                f"invalid vLLM option {option!r}: expected a long option such as --linear-backend",
                key=str(option),
            )
        key = match.group(1)
        if key in options:
            raise EmitError(f"vLLM option {option} is given twice", key=option)
        options[key] = check_value(option, value)
    return _VLLM_HEADER + _dump(options)


def render_trtllm_yaml(config: Mapping[str, object]) -> str:
    """TensorRT-LLM LLM-API options YAML from dotted keys, nested in block style.

    ``{"nvfp4_gemm_config.allowed_backends": ["cutlass"]}`` becomes::

        nvfp4_gemm_config:
          allowed_backends:
          - cutlass

    Values may be strings, numbers, booleans, None, and lists or mappings of those. Raises
    EmitError for a malformed key, a key that is both a value and a section, or a value YAML
    should not carry here.
    """
    tree: dict[str, object] = {}
    for dotted, value in config.items():
        segments = dotted.split(".") if isinstance(dotted, str) else []
        if not segments or not all(_KEY_SEGMENT.fullmatch(s) for s in segments):
            raise EmitError(
                f"invalid TensorRT-LLM option {dotted!r}: expected dotted names such as "
                "nvfp4_gemm_config.allowed_backends",
                key=str(dotted),
            )
        node = tree
        for depth, segment in enumerate(segments[:-1]):
            child = node.setdefault(segment, {})
            if not isinstance(child, dict):
                prefix = ".".join(segments[: depth + 1])
                raise EmitError(f"{dotted} conflicts with the value of {prefix}", key=dotted)
            node = child
        leaf = segments[-1]
        if leaf in node:
            raise EmitError(f"{dotted} is given twice or conflicts with a nested key", key=dotted)
        node[leaf] = _plain(dotted, value)
    return _TRTLLM_HEADER + _dump(tree)


def _plain(key: str, value: object) -> object:
    """`value` as plain YAML data (tuples become lists), or EmitError."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        return check_value(key, value)
    if isinstance(value, (list, tuple)):
        return [_plain(key, item) for item in value]
    if isinstance(value, Mapping):
        result: dict[str, object] = {}
        for name, item in value.items():
            if not isinstance(name, str):
                raise EmitError(f"{key}: mapping keys must be strings, not {name!r}", key=key)
            result[name] = _plain(f"{key}.{name}", item)
        return result
    raise EmitError(f"{key}: cannot write a {type(value).__name__} value as YAML", key=key)
