"""An engine server's words read as its own parser reads them: argparse over the release's
options (profiles/flags/), with the engine's own pre-processing in front.

- argparse (both engines): `--flag value`, `--flag=value`, a unique prefix of a long option
  (`allow_abbrev`, argparse's default, which neither engine turns off), switches (`nargs=0`)
  and their `--no-` forms where the release registers them, `choices`, and the errors argparse
  prints ("unrecognized arguments: ...", "argument --dtype: invalid choice: ...",
  "expected one argument", "ambiguous option: ...").
- vLLM's `FlexibleArgumentParser.parse_args` (vllm/utils/argparse_utils.py, before 0.13
  vllm/utils/__init__.py or vllm/utils.py): `--config FILE.yaml` (its keys become flags, placed
  before the command line's so that the command line wins), `_` in a flag name read as `-`,
  `-O3`, `-O 3`, `-O=3` (`--optimization-level` from 0.12, the compilation level before), and
  dotted JSON keys (`--compilation-config.mode 3`, `--kernel-config.enable_flashinfer_autotune
  false`, `-O.level=3`) merged into one JSON value per flag.
- SGLang's `prepare_server_args` (sglang/srt/server_args.py) with `ConfigArgumentMerger`
  (sglang/srt/server_args_config_parser.py, from 0.5.3rc2; sglang/srt/utils/ later):
  `--config FILE.yaml` keys become `--key value` words ahead of the command line's; a `true`
  switch becomes the switch, a `false` one is left out, other booleans `--key true|false`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from fp4doctor.command.flagdata import Option, ReleaseFlags
from fp4doctor.command.model import COMMAND_LINE, CommandError

_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")


@dataclass(frozen=True)
class Word:
    """One word of the command and where it came from (the command line, an environment
    variable, a config file)."""

    text: str
    source: str = COMMAND_LINE
    shown: str | None = None  # the word as the user wrote it, where the engine rewrote it

    @property
    def written(self) -> str:
        return self.text if self.shown is None else self.shown


@dataclass(frozen=True)
class Given:
    """One option as the parser took it: its dest, its value (a str, a list of str for several
    words, the switch's constant, or a dict for merged dotted keys), and the words as given."""

    dest: str
    value: Any
    flag: str
    source: str
    option: Option | None = None


@dataclass
class Read:
    """What the reader took from the words, in order, and what it could not check."""

    given: list[Given]
    positionals: list[Word]
    notes: list[str]


def _looks_like_option(text: str) -> bool:
    return text.startswith("-") and len(text) > 1 and not _NEGATIVE_NUMBER.match(text)


class Reader:
    """argparse's reading of one release's options (or of no known options, when `flags` is
    None: every option is then named in the notes and its value guessed from the next word)."""

    def __init__(self, flags: ReleaseFlags | None, title: str, known: dict[str, Option]) -> None:
        self.flags = flags
        self.title = title  # "vllm 0.34.0": the label of every error
        self.options: dict[str, Option] = dict(flags.options) if flags is not None else {}
        self.options.update(known)

    # -- argparse ------------------------------------------------------------------------------

    def error(self, message: str) -> CommandError:
        return CommandError(f"{self.title}: {message}")

    def match(self, text: str) -> tuple[Option | None, str, str | None]:
        """(option, the option string as written, the `=value` part), as argparse's
        `_parse_optional` finds it; option None when the release has none."""
        if text in self.options:
            return self.options[text], text, None
        name, eq, explicit = text.partition("=")
        if eq and name in self.options:
            return self.options[name], name, explicit
        if text.startswith("--"):
            prefix = name if eq else text
            hits = sorted(o for o in self.options if o.startswith(prefix) and o.startswith("--"))
            if len(hits) == 1:
                return self.options[hits[0]], name if eq else text, explicit if eq else None
            if len(hits) > 1 and self.complete:
                raise self.error(f"ambiguous option: {prefix} could match {', '.join(hits)}")
        elif len(name) > 2 and name[:2] in self.options and not eq:
            short = self.options[name[:2]]
            if short.nargs != 0:  # -qfp8: a one-letter option with its value attached
                return short, name[:2], name[2:]
        return None, name if eq else text, explicit if eq else None

    @property
    def complete(self) -> bool:
        return self.flags is not None and self.flags.complete

    def read(self, words: Sequence[Word]) -> Read:
        out = Read(given=[], positionals=[], notes=[])
        unknown: list[str] = []
        i = 0
        while i < len(words):
            word = words[i]
            i += 1
            if word.text == "--":
                out.positionals.extend(words[i:])
                break
            if not _looks_like_option(word.text):
                out.positionals.append(word)
                continue
            option, written, explicit = self.match(word.text)
            if option is None:
                if self.complete:
                    unknown.append(word.text)
                    # argparse leaves the value of an unknown option as an unknown word too
                    if (
                        explicit is None
                        and i < len(words)
                        and not _looks_like_option(words[i].text)
                    ):
                        unknown.append(words[i].text)
                        i += 1
                    continue
                value: Any = explicit
                if value is None and i < len(words) and not _looks_like_option(words[i].text):
                    value = words[i].text
                    i += 1
                where = self.flags.label if self.flags is not None else self.title
                out.notes.append(f"{written}: not known to fp4doctor for {where}; not checked")
                flag = word.text if explicit is not None or value is None else f"{written} {value}"
                out.given.append(Given(_dest(written), value, flag, word.source, None))
                continue
            value, used = self.take(option, written, explicit, words, i)
            shown = [word.written, *(w.written for w in words[i : i + used])]
            i += used
            flag = " ".join(s for s in shown if s)
            out.given.append(Given(option.dest, value, flag, word.source, option))
        if unknown:
            hint = "; ".join(
                f"{u}: {h}"
                for u in unknown
                if self.flags is not None and (h := self.flags.data.history(u.partition("=")[0]))
            )
            raise self.error(
                f"unrecognized arguments: {' '.join(unknown)}" + (f" ({hint})" if hint else "")
            )
        return out

    def take(
        self, option: Option, written: str, explicit: str | None, words: Sequence[Word], i: int
    ) -> tuple[Any, int]:
        """The option's value and how many following words it used."""
        nargs = option.nargs
        if nargs == 0:
            if explicit is not None:
                raise self.error(f"argument {written}: ignored explicit argument {explicit!r}")
            return option.const if option.const is not None else True, 0
        if explicit is not None:
            return self.check(option, written, explicit), 0
        following = []
        for w in words[i:]:
            if _looks_like_option(w.text) or w.text == "--":
                break
            following.append(w.text)
        if nargs == "?":
            if following:
                return self.check(option, written, following[0]), 1
            return option.const, 0
        if nargs in ("+", "*"):
            if nargs == "+" and not following:
                raise self.error(f"argument {written}: expected at least one argument")
            return [self.check(option, written, v) for v in following], len(following)
        count = int(nargs)
        if len(following) < count:
            what = "one argument" if count == 1 else f"{count} arguments"
            raise self.error(f"argument {written}: expected {what}")
        if count == 1:
            return self.check(option, written, following[0]), 1
        return [self.check(option, written, v) for v in following[:count]], count

    def check(self, option: Option, written: str, value: str) -> str:
        """The value as the release's `type=` leaves it, refused when not among the choices."""
        if option.normalise:
            value = value.lower().replace("-", "_")
        if option.choices is not None and value not in option.choices:
            choose = ", ".join(repr(c) for c in option.choices)
            raise self.error(
                f"argument {written}: invalid choice: {value!r} (choose from {choose})"
            )
        return value


def _dest(option: str) -> str:
    return option.lstrip("-").replace("-", "_")


# -- --config FILE.yaml ------------------------------------------------------------------------


def config_file(words: list[Word], label: str) -> tuple[str, dict[str, Any], int] | None:
    """The `--config FILE` of the words: (file, its keys, the index of `--config`); None when
    there is none. A missing or unreadable file, or not a mapping, is a CommandError."""
    at = [i for i, w in enumerate(words) if w.text == "--config" or w.text.startswith("--config=")]
    if not at:
        return None
    if len(at) > 1:
        raise CommandError(f"{label}: more than one --config file given")
    i = at[0]
    if words[i].text.startswith("--config="):
        path = words[i].text.partition("=")[2]
    elif i + 1 < len(words):
        path = words[i + 1].text
    else:
        raise CommandError(f"{label}: --config: no config file given")
    if not path.endswith((".yaml", ".yml")):
        raise CommandError(f"{label}: --config {path}: the config file must be YAML (.yaml/.yml)")
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise CommandError(f"{label}: --config {path}: cannot read it ({e.strerror})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        problem = getattr(e, "problem", None) or type(e).__name__
        raise CommandError(f"{label}: --config {path}: not valid YAML ({where}{problem})") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise CommandError(f"{label}: --config {path}: must hold a mapping of flags at its top")
    return path, data, i


def config_words(
    data: dict[str, Any], source: str, key_words: Callable[[str, Any], list[str]]
) -> list[Word]:
    return [Word(t, source) for key, value in data.items() for t in key_words(str(key), value)]


def vllm_key_words(options: dict[str, Option]) -> Callable[[str, Any], list[str]]:
    """vLLM's `FlexibleArgumentParser.load_config_file`: one key -> its words."""

    def words(key: str, value: Any) -> list[str]:
        if isinstance(value, bool):
            if value:
                return [f"--{key}"]
            return [f"--no-{key}"] if f"--no-{key}" in options else []
        if isinstance(value, list):
            return [f"--{key}", *(str(v) for v in value)] if value else []
        if isinstance(value, dict):
            return [f"--{key}", json.dumps(value)]
        return [f"--{key}", str(value)]

    return words


def sglang_key_words(
    options: dict[str, Option], strict: bool, where: str
) -> Callable[[str, Any], list[str]]:
    """SGLang's `ConfigArgumentMerger._convert_config_to_args`: one key -> its words. With
    `strict` (the release's merger has `unsupported_actions`), a key whose option is neither
    store_true nor one value is refused with the merger's words."""

    def words(key: str, value: Any) -> list[str]:
        option = options.get("--" + key.replace("_", "-"))
        if strict and option is not None and option.action is not None and option.nargs != 1:
            norm = key.replace("-", "_")
            raise CommandError(
                f"{where}: Unsupported config option {norm!r} with action {option.action!r}"
            )
        if isinstance(value, bool):
            if option is None or option.nargs == 0:
                return [f"--{key}"] if value else []
            return [f"--{key}", str(value).lower()]
        if isinstance(value, list):
            return [f"--{key}", *(str(v) for v in value)] if value else []
        if isinstance(value, dict):
            return [f"--{key}", json.dumps(value)]
        return [f"--{key}", str(value)]

    return words


# -- vLLM's own pre-processing -----------------------------------------------------------------

_DASHES = re.compile(r"(?<=--)[^.=]*")


def vllm_words(words: list[Word], options: dict[str, Option]) -> list[Word]:
    """`FlexibleArgumentParser.parse_args`: `_` -> `-` in flag names and the `-O` forms;
    dotted keys are merged later (`merge_dotted`)."""
    new_o = "--optimization-level" in options and "-O" not in options
    out: list[Word] = []
    i = 0
    while i < len(words):
        w = words[i]
        t = w.text
        if t.startswith("--"):
            t = _DASHES.sub(lambda m: m.group(0).replace("_", "-"), t, count=1)
            out.append(Word(t, w.source, None if t == w.text else w.text))
        elif t.startswith("-O") and t != "-O" and (new_o or t[2] != "."):
            level = t[3:] if t[2] == "=" else t[2:]
            if new_o:
                out += [Word("--optimization-level", w.source, t), Word(level, w.source, "")]
            else:
                out.append(Word(f"-O.level={level}", w.source, t))
        elif t == "-O" and i + 1 < len(words) and words[i + 1].text in {"0", "1", "2", "3"}:
            out.append(Word("--optimization-level" if new_o else "-O.level", w.source, t))
        else:
            out.append(w)
        i += 1
    return out


def merge_dotted(
    words: list[Word],
) -> tuple[list[Word], list[tuple[str, dict[str, Any], str, str]]]:
    """Dotted keys (`--kernel-config.enable_flashinfer_autotune false`, `-O.level=3`) out of the
    words, merged per flag: (the other words, [(flag, merged dict, words as given, source)])."""
    rest: list[Word] = []
    merged: dict[str, tuple[dict[str, Any], list[str], str]] = {}
    i = 0
    while i < len(words):
        w = words[i]
        t = w.text
        i += 1
        if not (t.startswith("-") and "." in t.partition("=")[0]):
            rest.append(w)
            continue
        if "=" in t:
            key, value_text = t.split("=", 1)
            shown = w.written
        elif i < len(words):
            key, value_text = t, words[i].text
            shown = f"{w.written} {words[i].written}".strip()
            i += 1
        else:
            rest.append(w)
            continue
        if key.endswith("+"):
            key = key[:-1]
            value_text = json.dumps(value_text.split(","))
        root, *path = key.split(".")
        try:
            value: Any = json.loads(value_text)
        except json.JSONDecodeError:
            value = value_text
        target, shown_all, _ = merged.setdefault(root, ({}, [], w.source))
        node = target
        for part in path[:-1]:
            node = node.setdefault(part, {})
        if isinstance(node.get(path[-1]), list) and isinstance(value, list):
            node[path[-1]] = node[path[-1]] + value
        else:
            node[path[-1]] = value
        shown_all.append(shown)
    return rest, [(root, d, " ".join(s), src) for root, (d, s, src) in merged.items()]
