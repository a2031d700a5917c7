"""Which versions of a package the package index holds (profiles/index.json, read from PyPI by
`python3 -m tools.extract.index`, with the date it was read), so that a fix never pins a release
that `pip install` cannot find."""

from __future__ import annotations

import functools
import json

from packaging.version import InvalidVersion, Version

from fp4doctor.facts import canonical_name
from fp4doctor.shipped import profiles_dir

INDEX_FILE = "index.json"


@functools.lru_cache(maxsize=1)
def _index() -> dict[str, tuple[str, ...]]:
    try:
        doc = json.loads((profiles_dir() / INDEX_FILE).read_text(encoding="utf-8"))
        packages = doc["packages"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    return {canonical_name(k): tuple(v) for k, v in packages.items()}


def versions(package: str) -> tuple[str, ...] | None:
    """The released versions of `package`, oldest first; None when the list does not know it
    (not every package is listed: then nothing can be said, and no fix is changed)."""
    return _index().get(canonical_name(package))


def exists(package: str, version: str) -> bool | None:
    """Whether `package==version` is on the index; None when the list does not know the package."""
    known = versions(package)
    return None if known is None else version in known


def newest_common(follower: str, leader: str, at_most: str) -> str | None:
    """The newest version released for both packages that is not newer than `at_most`."""
    a, b = versions(follower), versions(leader)
    if a is None or b is None:
        return None
    try:
        limit = Version(at_most)
        both = [v for v in set(a) & set(b) if Version(v) <= limit and not Version(v).is_prerelease]
    except InvalidVersion:
        return None
    return max(both, key=Version, default=None)
