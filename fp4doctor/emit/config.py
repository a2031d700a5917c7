"""Config files in the engines' own formats: vLLM's and SGLang's ``--config`` YAML (keys are
the server's long options), TensorRT-LLM's options YAML; and which file a choice needs.

Values go through ``yaml.safe_dump``, which quotes whatever YAML would otherwise read as
another type or as syntax (``yes``, ``1.0``, ``null``, ``: ``, ``#``...). An env file for the
engines that take environment variables only is the dotenv format (`fp4doctor.emit.emit`).

What goes where (`plan`): flags and config keys go in the engine's own YAML, when the release
reads one (vLLM: every release fp4doctor knows; SGLang from 0.5.3rc2; the profile's
``config_from`` and ``config_source`` say so); environment variables cannot go in it (both
engines turn each key into ``--key value``), so they go in a dotenv file. A choice that needs
both needs both files. Before the engine reads a YAML, its flags are written to the dotenv file
in its args variable, for ``set -a; . FILE; set +a`` and an unquoted ``$FP4DOCTOR_..._ARGS``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import yaml
from packaging.version import InvalidVersion, Version

from fp4doctor.emit.exports import EmitError, Exports, check_value
from fp4doctor.emit.knobs import Settings, exports_for
from fp4doctor.emit.serve import SERVE, serve_command
from fp4doctor.profile.model import Engine, Profile

_LONG_OPTION = re.compile(r"--([A-Za-z0-9][A-Za-z0-9_-]*)")
_KEY_SEGMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

# The formats whose keys are the server's long options without the leading --.
ARGS_YAML = ("vllm-yaml", "sglang-yaml")
YAML_SUFFIXES = (".yaml", ".yml")  # both vLLM and SGLang refuse any other name
DOTENV_SUFFIX = ".env"
_TRTLLM_HEADER = (
    "# Written by fp4doctor. Use: trtllm-serve MODEL --config FILE\n"
    "# (older releases: --extra_llm_api_options FILE)\n"
)


def _args_header(fmt: str) -> str:
    engine = "vllm" if fmt == "vllm-yaml" else "sglang"
    return (
        f"# Written by fp4doctor. Use: {SERVE[engine]} --config FILE\n"
        "# (keys are the server's options without the leading --)\n"
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


def render_args_yaml(cli_args: Sequence[tuple[str, str]], fmt: str = "vllm-yaml") -> str:
    """vLLM's or SGLang's ``--config`` YAML (`fmt`: "vllm-yaml", "sglang-yaml") from
    ``(--option, value)`` pairs.

    Both turn each key back into ``--key value``, so ``("--linear-backend",
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
    return _args_header(fmt) + _dump(options)


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


# --- which file a choice needs ------------------------------------------------------------------


def yaml_format(engine: Engine, version: str) -> str | None:
    """The engine's own config format at `version` ("vllm-yaml", "sglang-yaml", "trtllm-yaml"),
    or None where it reads none (a dotenv engine, or a release before `config_from`)."""
    if engine.config_format == "dotenv":
        return None
    if engine.config_from is not None:
        try:
            if Version(version) < Version(engine.config_from):
                return None
        except InvalidVersion:
            return None
    return engine.config_format


@dataclass(frozen=True)
class Plan:
    """What a choice needs written: the engine's YAML (`yaml`, its text, None when the choice has
    nothing for it) and the dotenv file of the variables (`dotenv`; needed when it sets any)."""

    yaml_fmt: str | None  # the engine's format at this release, None where it reads none
    yaml: str | None
    dotenv: Exports
    notes: tuple[str, ...]  # how to use them, for stderr


def plan(profile: Profile, version: str, label: str, settings: Settings) -> Plan:
    """Split `settings` between the engine's YAML and a dotenv file.

    Flags and config keys go in the YAML where the release reads one; environment variables, and
    flags where it reads none, in the dotenv file (flags in the engine's args variable)."""
    fmt = yaml_format(profile.engine, version)
    yaml_text: str | None = None
    rest = settings
    if settings.config and fmt == "trtllm-yaml":
        yaml_text = render_trtllm_yaml(dict(settings.options))
        rest = Settings(settings.chosen, set_env=settings.set_env, unset_env=settings.unset_env)
    elif settings.cli_args and fmt in ARGS_YAML:
        yaml_text = render_args_yaml(settings.cli_args, fmt)
        rest = Settings(
            settings.chosen,
            set_env=settings.set_env,
            unset_env=settings.unset_env,
            arguments=settings.arguments,
        )
    exports, notes = exports_for(profile, rest, label)
    return Plan(fmt, yaml_text, exports, tuple(notes))


def _kind(path: str) -> str | None:
    """ "yaml" or "dotenv" by the name's suffix; None for '-' or another name."""
    name = path.lower()
    if name.endswith(YAML_SUFFIXES):
        return "yaml"
    return "dotenv" if name.endswith(DOTENV_SUFFIX) else None


def files(
    p: Plan, outputs: Sequence[str], profile: Profile, version: str, label: str
) -> list[tuple[str, str, str]]:
    """Each output with its text and the note to print before it is written: `outputs` name
    one file, or two (one NAME.yaml, one NAME.env) for a choice that needs both. Raises
    EmitError, naming the right file, when a name does not fit what the choice needs."""
    target, engine = profile.target, profile.engine
    needs = [k for k, part in (("yaml", p.yaml), ("dotenv", p.dotenv.set)) if part]
    if not needs:  # nothing to set: an empty file, the engine's own unless the name says
        needs = [_kind(outputs[0]) or ("yaml" if p.yaml_fmt else "dotenv")]
    variables = " ".join(name for name, _ in p.dotenv.set)
    what = "options" if p.yaml_fmt == "trtllm-yaml" else "command-line flags"
    both = (
        f"{label} takes this choice as {what} (its --config YAML) and as environment "
        f"variables ({variables}), which the YAML cannot hold: write both files, "
        f"-o {target}-fp4.yaml -o {target}-fp4.env"
    )
    if len(outputs) > 2 or len(set(outputs)) != len(outputs):
        raise EmitError("-o names one file, or two: one NAME.yaml and one NAME.env")
    kinds = [_kind(o) for o in outputs]
    if len(outputs) == 2 and sorted(k or "" for k in kinds) != ["dotenv", "yaml"]:
        raise EmitError("two -o files are one NAME.yaml (the engine's) and one NAME.env")
    if "yaml" in kinds and p.yaml_fmt is None:
        since = (
            f" (it reads --config YAML from {engine.config_from})"
            if engine.config_from and engine.config_format != "dotenv"
            else ""
        )
        raise EmitError(
            f"{label} reads no config file{since}: its choice is a dotenv file of variables, "
            f"name it NAME.env (-o {target}-fp4.env)"
        )
    if len(outputs) == 1:
        kind = kinds[0] or (needs[0] if len(needs) == 1 else None)
        if kind is None or len(needs) == 2:
            raise EmitError(both)
        if kind == "yaml" and kinds[0] is None and outputs[0] != "-" and p.yaml_fmt in ARGS_YAML:
            # vLLM: vllm/utils/argparse_utils.py FlexibleArgumentParser.load_config_file ("Config
            # file must be of a yaml/yml type"); SGLang: sglang/srt/server_args_config_parser.py
            # _validate_yaml_file ("Config file must be YAML format").
            stem = os.path.splitext(os.path.basename(outputs[0]))[0] or f"{target}-fp4"
            raise EmitError(
                f"{label} reads its --config file only when it is named .yaml or .yml, and "
                f"refuses {outputs[0]}: name it NAME.yaml (-o {stem}.yaml)"
            )
        if kind not in needs:
            if kind == "yaml":
                raise EmitError(
                    f"{label} takes this choice from environment variables ({variables}), "
                    f"which its --config YAML cannot hold: name the file NAME.env "
                    f"(-o {target}-fp4.env)"
                )
            raise EmitError(
                f"{label} takes this choice as {what}, which it reads from its own config "
                f"file: name it NAME.yaml (-o {target}-fp4.yaml)"
            )
        kinds = [kind]
    out: list[tuple[str, str, str]] = []
    for path, kind in zip(outputs, kinds, strict=True):
        if kind == "yaml":
            assert p.yaml_fmt is not None
            text = p.yaml or (
                render_trtllm_yaml({})
                if p.yaml_fmt == "trtllm-yaml"
                else render_args_yaml((), p.yaml_fmt)
            )
            since = f", read from {engine.config_from} on" if engine.config_from else ""
            which = f"{profile.title}'s --config YAML{since}"
            note = (
                f"writing {which}"
                if p.yaml
                else f"nothing to set for {label}: writing an empty config ({which})"
            )
            if len(outputs) == 1 and p.dotenv.unset:
                note += "; also unset: " + " ".join(p.dotenv.unset)
        else:
            from fp4doctor.emit import emit

            dotenv_words(p.dotenv, profile, version, label)
            text = emit("dotenv", p.dotenv)
            note = "writing a dotenv file of the variables"
            if engine.config_format != "dotenv" and p.yaml_fmt is None:
                note += (
                    f" ({label} reads no config file; it reads --config YAML from "
                    f"{engine.config_from})"
                )
        out.append((path, text, note))
    return out


def dotenv_words(exports: Exports, profile: Profile, version: str, label: str) -> None:
    """Raise EmitError, with what works instead, when a list of `exports` holds several words:
    a dotenv value cannot hold a space that sh, docker and python-dotenv all read the same."""
    for name in exports.lists:
        if len(exports.words(name)) < 2:
            continue
        fmt = yaml_format(profile.engine, version)
        target = profile.target
        if fmt is not None:
            instead = (
                f"write them as {label}'s own config file: `fp4doctor config --target {target} "
                f"-o {target}-fp4.yaml` (add `-o {target}-fp4.env` for its environment "
                f"variables), then {serve_command(target) or target} --config {target}-fp4.yaml"
            )
        elif profile.engine.config_format != "dotenv" and profile.engine.config_from:
            instead = (
                f"{label} reads no config file (from {profile.engine.config_from} it reads "
                f"--config YAML); in a shell, `x=$(fp4doctor env --target {target}) && eval "
                f'"$x"`, then {serve_command(target) or target} ${name}'
            )
        else:
            instead = (
                f"a program reads them as a list from `fp4doctor env --target {target} --shell "
                f'json` ("lists"); a shell from `fp4doctor env --target {target}`'
            )
        raise EmitError(
            f"cannot write {name} to a dotenv file: it holds {len(exports.words(name))} words "
            f"({dict(exports.set)[name]}), and no dotenv value holds a space that sh, docker "
            f"and python-dotenv all read the same; {instead}",
            key=name,
        )
