"""`parse`: an engine's command line -> EngineCommand, refusing what the release's parser refuses.

The steps, each in its own module: which engine and entry point (launcher), the release's
options (flagdata, from profiles/flags/), the words as the engine's parser reads them (reader),
and the fields they set (fields).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from types import MappingProxyType

from fp4doctor.command import fields as fieldmap
from fp4doctor.command import trtllm
from fp4doctor.command.flagdata import Option, ReleaseFlags, flags_for
from fp4doctor.command.launcher import Launch, recognise
from fp4doctor.command.model import CommandError, EngineCommand
from fp4doctor.command.reader import (
    Given,
    Reader,
    Word,
    config_file,
    config_words,
    merge_dotted,
    sglang_key_words,
    vllm_key_words,
    vllm_words,
)

# The variable `fp4doctor env` writes each engine's flags into (profiles/<engine>.yaml
# engine.args_variable; tests/test_command.py checks they agree). The user runs
# `vllm serve MODEL $FP4DOCTOR_VLLM_ARGS`: its words come after the command line's.
ARGS_VARIABLES = {
    "vllm": "FP4DOCTOR_VLLM_ARGS",
    "sglang": "FP4DOCTOR_SGLANG_ARGS",
    "trtllm": "FP4DOCTOR_TRTLLM_ARGS",
}


def parse(
    argv: Sequence[str],
    *,
    release: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> EngineCommand:
    """Read `argv` (`vllm serve MODEL ...`, `python -m sglang.launch_server ...`, ...; one
    string is split as a shell would) as `release` of its engine reads it (None: the newest
    release fp4doctor knows, said in the notes), with `environ`'s FP4DOCTOR_<ENGINE>_ARGS
    words after it. Raises CommandError when the engine would refuse the command line, or when
    it is no engine's."""
    words = tuple(argv)
    if len(words) == 1 and any(c.isspace() for c in words[0]):
        try:
            words = tuple(shlex.split(words[0]))
        except ValueError as e:
            raise CommandError(f"cannot split the command line: {e}") from None
    launch = recognise(words)
    flags = flags_for(launch.target, release)
    label = flags.label if flags is not None else f"{launch.target} {release or ''}".strip()
    notes = list(flags.notes) if flags is not None else []
    known: dict[str, Option] = {}
    if launch.target == "trtllm":
        known = trtllm.options()
        notes.append(
            "TensorRT-LLM: its wheels are not on PyPI, so no release's flags were extracted; "
            "trtllm-serve's options are read from its source (tensorrt_llm/commands/serve.py), "
            "and an unknown one is named, not refused"
        )
    reader = Reader(flags, label, known)
    stream = [Word(w) for w in launch.words]
    variable = ARGS_VARIABLES[launch.target]
    if environ is not None and environ.get(variable, "").strip():
        stream += [Word(w, variable) for w in environ[variable].split()]
    stream = _expand_config(launch, stream, reader, flags, label)
    merged: list[tuple[str, dict[str, object], str, str]] = []
    if launch.target == "vllm":
        stream = vllm_words(stream, reader.options)
        stream, merged = merge_dotted(stream)
    read = reader.read(stream)
    notes += read.notes
    given = list(read.given)
    for root, value, shown, source in merged:
        option, _, _ = reader.match(root)
        if option is None:
            if reader.complete:
                raise CommandError(f"{label}: unrecognized arguments: {shown}")
            notes.append(f"{shown}: not known to fp4doctor for {label}; not checked")
            continue
        given.append(Given(option.dest, value, shown, source, option))
    given = _positionals(launch, read.positionals, reader, label, notes) + given
    table = fieldmap.HANDLERS[launch.target]
    found = fieldmap.Fields(label)
    for g in given:
        handle = table.get(g.dest)
        if handle is not None:
            handle(found, g)
    fieldmap.DERIVED[launch.target](found)
    model = found.settings.get("model")
    if model is None:
        need = {"vllm": "MODEL (or --model)", "sglang": "--model-path", "trtllm": "MODEL"}
        notes.append(f"{launch.entry}: no {need[launch.target]} given; judged without a model")
    return EngineCommand(
        target=launch.target,
        argv=words,
        model=None if model is None else str(model.value),
        settings=MappingProxyType(dict(found.settings)),
        release=flags.release if flags is not None else release,
        environment=MappingProxyType(dict(launch.environment)),
        notes=tuple(dict.fromkeys(notes)),
    )


def _expand_config(
    launch: Launch, stream: list[Word], reader: Reader, flags: ReleaseFlags | None, label: str
) -> list[Word]:
    """`--config FILE.yaml` replaced by its keys as flags, ahead of the other words (the command
    line wins, as both engines order them). vLLM's FlexibleArgumentParser reads it in every
    release covered; SGLang from 0.5.3rc2 (the release that registers `--config`): before, the
    option is refused as unknown. TensorRT-LLM's --config is its own option (fields)."""
    if launch.target == "trtllm":
        return stream
    if launch.target == "sglang" and "--config" not in reader.options:
        return stream
    got = config_file(stream, label)
    if got is None:
        return stream
    path, data, at = got
    source = f"--config {path}"
    drop = 1 if stream[at].text.startswith("--config=") else 2
    rest = stream[:at] + stream[at + drop :]
    if launch.target == "vllm":
        key_words = vllm_key_words(reader.options)
    else:
        strict = flags is not None and flags.config_strict
        key_words = sglang_key_words(reader.options, strict, f"{label}: {source}")
    return config_words(data, source, key_words) + rest


def _positionals(
    launch: Launch, positionals: list[Word], reader: Reader, label: str, notes: list[str]
) -> list[Given]:
    """The model given as a word of its own (`vllm serve MODEL`, `trtllm-serve MODEL`); any other
    is refused as argparse refuses it."""
    out: list[Given] = []
    rest = positionals
    if launch.target in ("vllm", "trtllm") and positionals:
        first = positionals[0]
        out.append(Given("model", first.text, first.text, first.source))
        rest = positionals[1:]
    if rest:
        extra = " ".join(w.text for w in rest)
        if reader.complete or launch.target == "trtllm":
            raise CommandError(f"{label}: unrecognized arguments: {extra}")
        notes.append(f"{extra}: words fp4doctor cannot place for {label}; not read")
    return out
