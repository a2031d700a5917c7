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


def is_version(text: str) -> bool:
    try:
        Version(text)
    except InvalidVersion:
        return False
    return True


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
