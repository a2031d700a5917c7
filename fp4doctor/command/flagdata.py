"""The flags each engine release's server parser accepts, as tools/extract/flags.py read them from
the released wheels (profiles/flags/vllm.json, sglang.json).

A data file lists the releases it covers (`releases`), those whose whole option list was read
(`complete`), and per option string the release ranges it exists in with its spec: `dest`,
`nargs` (0: a switch storing `const`), `choices` (FP4-relevant options only) and `normalise`
(the value is lower-cased and `-` made `_` before the choices are checked). A release the data
does not list is read with the nearest older one it does, and the notes say so.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from packaging.version import InvalidVersion, Version

from fp4doctor.shipped import profiles_dir

TITLES = {"vllm": "vLLM", "sglang": "SGLang", "trtllm": "TensorRT-LLM"}


@dataclass(frozen=True)
class Option:
    """One option string of one release's parser."""

    name: str
    dest: str
    nargs: int | str  # 0, 1, "?", "+", "*" (or an int > 1)
    const: Any = None
    choices: tuple[str, ...] | None = None
    normalise: bool = False
    action: str | None = None  # SGLang: an action other than store / store_true


@dataclass(frozen=True)
class FlagData:
    """One engine's data file: every covered release and each option's ranges."""

    target: str
    releases: tuple[str, ...]
    complete: frozenset[str]
    ranges: Mapping[str, tuple[tuple[str, str, Mapping[str, Any]], ...]]
    source: str
    # SGLang releases whose --config merger refuses a key whose option is neither store_true
    # nor one value ("Unsupported config option ..."; ConfigArgumentMerger.unsupported_actions)
    config_strict: frozenset[str] = frozenset()

    def history(self, name: str) -> str:
        """When `name` existed: "introduced in vllm 0.22.0", "removed in sglang 0.5.4.post1
        (last in 0.5.4)", "in vllm 0.12.0-0.20.2 (removed in 0.21.0)", "in vllm 0.8.0-0.28.0,
        0.33.0-0.34.0"; "" when no covered release has it."""
        spans = _merged(self.ranges.get(name, ()), self.releases)
        if not spans:
            return ""
        oldest, newest = self.releases[0], self.releases[-1]
        if len(spans) > 1:
            return f"in {self.target} " + ", ".join(f"{a}-{b}" if a != b else a for a, b in spans)
        first, last = spans[0]
        after = self.releases[self.releases.index(last) + 1] if last != newest else None
        if after is None:
            return "" if first == oldest else f"introduced in {self.target} {first}"
        if first == oldest:
            return f"removed in {self.target} {after} (last in {last})"
        return f"in {self.target} {first}-{last} (removed in {after})"


def _merged(
    spans: tuple[tuple[str, str, Mapping[str, Any]], ...], releases: tuple[str, ...]
) -> list[tuple[str, str]]:
    """Adjacent release ranges joined (a range ends where its spec changes)."""
    out: list[list[str]] = []
    for first, last, _ in spans:
        if out and releases.index(out[-1][1]) + 1 == releases.index(first):
            out[-1][1] = last
        else:
            out.append([first, last])
    return [(a, b) for a, b in out]


@dataclass(frozen=True)
class ReleaseFlags:
    """The options of the release a command line is read with."""

    data: FlagData
    release: str  # the covered release whose options these are
    options: Mapping[str, Option]
    complete: bool
    notes: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        return f"{self.data.target} {self.release}"

    @property
    def config_strict(self) -> bool:
        return self.release in self.data.config_strict


def _path(target: str) -> Path:
    return profiles_dir() / "flags" / f"{target}.json"


@functools.cache
def load(target: str) -> FlagData | None:
    """The data file of `target`, or None when there is none (TensorRT-LLM)."""
    path = _path(target)
    if not path.is_file():
        return None
    raw = json.loads(path.read_text())
    ranges = {
        name: tuple((first, last, MappingProxyType(spec)) for first, last, spec in spans)
        for name, spans in raw["options"].items()
    }
    return FlagData(
        target=target,
        releases=tuple(raw["releases"]),
        complete=frozenset(raw["complete"]),
        ranges=MappingProxyType(ranges),
        source=raw.get("source", ""),
        config_strict=frozenset(raw.get("config_strict", ())),
    )


def _version(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None


def covered(data: FlagData, release: str | None) -> tuple[str, list[str]]:
    """The covered release to read `release` with, and why when it is not `release` itself."""
    newest = data.releases[-1]
    if release is None:
        return newest, [
            f"{TITLES[data.target]} release not given: the command is read with the flags of "
            f"{data.target} {newest}, the newest release fp4doctor knows"
        ]
    if release in data.releases:
        return release, []
    wanted = _version(release)
    if wanted is None:
        return newest, [
            f"{release!r} is not a version: the command is read with {data.target} {newest}'s flags"
        ]
    local = Version(wanted.public)
    if str(local) in data.releases:
        return str(local), []
    older = [r for r in data.releases if Version(r) <= local]
    if not older:
        first = data.releases[0]
        return first, [
            f"{data.target} {release} is older than the flag data ({first} to {newest}): read "
            f"with {first}'s flags"
        ]
    pick = older[-1]
    if pick == newest:
        why = f"newer than {newest}, the newest release fp4doctor knows (unverified)"
    else:
        span = f"{len(data.releases)} releases, {data.releases[0]} to {newest}"
        why = f"not in the flag data ({span})"
    return pick, [f"{data.target} {release} is {why}: the command is read with {pick}'s flags"]


@functools.cache
def _options(target: str, release: str) -> Mapping[str, Option]:
    data = load(target)
    assert data is not None
    out: dict[str, Option] = {}
    rank = data.releases.index(release)
    for name, spans in data.ranges.items():
        for first, last, spec in spans:
            if data.releases.index(first) <= rank <= data.releases.index(last):
                choices = spec.get("choices")
                out[name] = Option(
                    name=name,
                    dest=str(spec["dest"]),
                    nargs=spec["nargs"],
                    const=spec.get("const"),
                    choices=None if choices is None else tuple(choices),
                    normalise=bool(spec.get("normalise")),
                    action=spec.get("action"),
                )
                break
    return MappingProxyType(out)


def flags_for(target: str, release: str | None) -> ReleaseFlags | None:
    """The options `target`'s `release` accepts (None: the newest known release's), or None
    when fp4doctor has no flag data for the engine."""
    data = load(target)
    if data is None:
        return None
    pick, notes = covered(data, release)
    complete = pick in data.complete
    if not complete:
        notes.append(
            f"{data.target} {pick}: its full option list could not be read from the wheel; an "
            "option fp4doctor does not know there is named, not refused"
        )
    return ReleaseFlags(
        data=data,
        release=pick,
        options=_options(target, pick),
        complete=complete,
        notes=tuple(notes),
    )
