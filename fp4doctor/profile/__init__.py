"""Profiles: the shipped YAML rules per target, and the user's own (`--profile PATH`)."""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import TYPE_CHECKING

from fp4doctor import cache
from fp4doctor.profile import advisories
from fp4doctor.profile.model import Profile
from fp4doctor.profile.yamlnode import ProfileError
from fp4doctor.shipped import profiles_dir
from fp4doctor.textfile import UnreadableText, read_text

if TYPE_CHECKING:  # the parser (and the YAML library) is imported only to parse: not on a hit
    from fp4doctor.profile.schema import Conditions

__all__ = [
    "Profile",
    "ProfileError",
    "builtin_dir",
    "builtin_names",
    "load",
    "load_file",
    "load_module",
]


def builtin_dir() -> Path:
    """Where the shipped profiles are: inside the wheel, or `profiles/` in a source checkout."""
    return profiles_dir()


# Data files beside the profiles that are not targets.
NOT_TARGETS = frozenset({"advisories", "coldstart", "shapes"})


def builtin_names() -> list[str]:
    """The shipped targets (profiles/NAME.yaml)."""
    return sorted(p.stem for p in builtin_dir().glob("*.yaml") if p.stem not in NOT_TARGETS)


def _read(path: str | Path) -> str:
    try:
        return read_text(path)
    except UnreadableText as exc:
        raise ProfileError(str(exc)) from None


@functools.cache
def load_module(name: str) -> Conditions:
    """A shipped module's named conditions (profiles/common/NAME.yaml); KeyError names the
    valid modules."""
    from fp4doctor.profile.schema import module_path, parse_module

    path = module_path(builtin_dir(), name)
    if not path.is_file():
        known = sorted(p.stem for p in path.parent.glob("*.yaml"))
        raise KeyError(f"includes no shipped module {name!r} (valid: {', '.join(known)})")
    return parse_module(_read(path), str(path))


def load_file(path: str | Path) -> Profile:
    """One profile file, parsed and validated (once per file version in a process)."""
    try:
        st = os.stat(path)
    except OSError:
        return _parse(str(path))[0]  # _read says why
    return _parsed(str(path), st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=64)
def _parsed(path: str, mtime_ns: int, size: int) -> Profile:
    # Profiles are immutable: one parse serves every later load of the same file version, in
    # this process and (fp4doctor/cache.py) in the next ones.
    return cache.cached("profile", path, lambda: _parse(path))


def _parse(path: str) -> tuple[Profile, list[str]]:
    """The profile in `path`, and the shipped modules it includes (the other files read)."""
    from fp4doctor.profile.schema import module_path, parse

    included: list[str] = []

    def modules(name: str) -> Conditions:
        conditions = load_module(name)
        included.append(str(module_path(builtin_dir(), name)))
        return conditions

    return parse(_read(path), path, modules), included


@functools.cache
def known_issues() -> tuple[advisories.KnownIssue, ...]:
    """The shipped data set of known problems (profiles/advisories.yaml)."""
    path = str(builtin_dir() / "advisories.yaml")
    return cache.cached("advisories", path, lambda: (advisories.parse(_read(path), path), []))


def load(target: str, overrides: list[Path] | None = None) -> Profile:
    """The profile for `target` (a user's `--profile` file for it wins over the shipped one),
    with the known problems of its backends attached as advisories."""
    for path in overrides or []:
        profile = load_file(path)
        if profile.target == target:
            return advisories.attach(profile, known_issues())
    path = builtin_dir() / f"{target}.yaml"
    if not path.is_file():
        known = sorted({*builtin_names(), *(load_file(p).target for p in overrides or [])})
        raise ProfileError(f"no profile for target '{target}' (valid: {', '.join(known)})")
    return advisories.attach(load_file(path), known_issues())
