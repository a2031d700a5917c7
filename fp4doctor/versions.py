"""The one meaning of "this version is in that range", and how ranges are written for people.

Every version comparison of the doctor, its tests and its docs goes through here, so that a
build and the release it belongs to are judged alike everywhere.
"""

from __future__ import annotations

import functools

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

# Lower bounds first, so ">=0.11.1,<0.15" reads in that order (SpecifierSet sorts by text).
_OPERATOR_ORDER = {">=": 0, ">": 0, "~=": 1, "==": 1, "===": 1, "!=": 2, "<=": 3, "<": 3}


def release_of(version: str) -> Version:
    """The release a build belongs to: 0.5.10rc0, 0.11.1.dev12, 0.7.2.post1 and 2.9.1+cu128
    count as 0.5.10, 0.11.1, 0.7.2 and 2.9.1. Raises InvalidVersion for a non-PEP 440 text."""
    return Version(Version(version).base_version)


@functools.cache  # one diagnosis asks the same few questions hundreds of times (every rule's when)
def contains(spec: SpecifierSet, version: str) -> bool | None:
    """`version in spec`, judged by the release it belongs to; None when it cannot be parsed.

    Engines cut release candidates and dev builds of the release they will become, and ship
    post-releases and local builds (`+cu128`) of one they made: 0.5.10rc0 is judged as 0.5.10
    (PEP 440 alone would put it below `>=0.5.10` and outside `<0.5.10` too). Only where a
    specifier names a pre- or post-release of that same release (`>=1.2.0rc5`,
    `>=0.5.5.post3`) is the version compared as itself (less any local part), so a boundary
    inside one release's builds can be stated."""
    try:
        v = Version(version)
    except InvalidVersion:
        return None
    exact = (v.is_prerelease or v.is_postrelease) and any(
        _within_release(Version(s.version), v) for s in spec if is_version(s.version)
    )
    if exact:
        return spec.contains(Version(v.public), prereleases=True)
    return spec.contains(Version(v.base_version), prereleases=True)


def _within_release(bound: Version, v: Version) -> bool:
    """A bound that names a pre-, dev- or post-release of `v`'s own release."""
    special = bound.is_prerelease or bound.is_postrelease or bound.is_devrelease
    return special and bound.release == v.release


MAX_VERSION_CHARS = 64
"""The longest version text read from the command line: the longest release any engine or
library here has cut is under 30 characters (`0.5.10rc0+cu128.post1.dev20250101`); 5,000 digits
once reached Python's 4,300-digit conversion limit inside packaging (a traceback)."""


def is_version(text: str) -> bool:
    """A PEP 440 version of at most MAX_VERSION_CHARS characters."""
    if len(text) > MAX_VERSION_CHARS:
        return False
    try:
        Version(text)
    except ValueError:  # InvalidVersion, or an integer over Python's digit limit
        return False
    return True


def not_a_version(option: str, text: str) -> str:
    """The one-line refusal of `text` given to `option` (shortened: it may be 5,000 digits)."""
    long = len(text) > MAX_VERSION_CHARS
    shown = f"{text[:20]!r}... ({len(text)} characters)" if long else repr(text)
    return f"{option} {shown} is not a version (e.g. 0.15.1)"


def same_version(a: str, b: str) -> bool:
    """`a` and `b` name one version, as PEP 440 reads them: `v0.34.0`, `0.34.0` and the local
    build `0.34.0+cu128` alike (the local part is a build of that release, not another one)."""
    try:
        return Version(Version(a).public) == Version(Version(b).public)
    except ValueError:
        return a == b


@functools.cache  # every rule's description, for each backend and GPU
def spec_text(spec: SpecifierSet) -> str:
    """A specifier as people write it, lower bounds first: '>=0.11.1, <0.15'."""
    parts = sorted(spec, key=lambda s: (_OPERATOR_ORDER.get(s.operator, 1), s.version))
    return ", ".join(f"{s.operator}{s.version}" for s in parts) or "any version"


def bounds(spec: SpecifierSet) -> tuple[Version | None, Version | None]:
    """The `>=` lower and `<` upper bound of a simple range (None where open).

    Raises ValueError for a specifier that is not a half-open range (`==`, `!=`, `<=`, `>`,
    two lower bounds), which cannot be checked for gaps and overlaps."""
    lower: Version | None = None
    upper: Version | None = None
    for s in spec:
        if s.operator == ">=" and lower is None:
            lower = Version(s.version)
        elif s.operator == "<" and upper is None:
            upper = Version(s.version)
        else:
            raise ValueError(f"{spec} is not a range of the form '>=A,<B'")
    return lower, upper
