"""Read files out of released wheels on the package index without downloading them whole.

A wheel is a zip: its central directory sits at the end, so a few HTTP range requests read the
directory and then only the members asked for (vLLM's wheel is ~400 MB; its envs.py a few KB).
Members read are cached under ~/.cache/fp4doctor-extract, so a re-run asks the index for nothing
it already has. Maintainer tooling: not part of the installed package.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import parse_wheel_filename
from packaging.version import InvalidVersion, Version

INDEX = "https://pypi.org/pypi/{name}/json"
CACHE = Path(os.environ.get("FP4DOCTOR_EXTRACT_CACHE", Path.home() / ".cache/fp4doctor-extract"))
TIMEOUT = 120


@dataclass(frozen=True)
class Release:
    """One released version of a project and the wheel chosen to read it from."""

    project: str
    version: str
    wheel_url: str
    wheel_name: str
    size: int
    yanked: bool = False


def _get_json(url: str) -> dict[str, object]:
    with urllib.request.urlopen(url, timeout=TIMEOUT) as r:
        data: dict[str, object] = json.load(r)
        return data


def _platform_rank(filename: str) -> tuple[int, str]:
    """Prefer a pure-Python wheel, then x86-64 Linux, then anything."""
    tags = parse_wheel_filename(filename)[3]
    plats = {t.platform for t in tags}
    if "any" in plats:
        return (0, filename)
    if any("x86_64" in p and "linux" in p for p in plats):
        return (1, filename)
    return (2, filename)


def releases(project: str, include_prereleases: bool = True) -> list[Release]:
    """Every release of `project` that has a wheel, oldest first (yanked ones marked)."""
    base = INDEX.format(name=project)
    data = _get_json(base)
    out: list[Release] = []
    raw = data["releases"]
    assert isinstance(raw, dict)
    for version, files in raw.items():
        try:
            v = Version(version)
        except InvalidVersion:
            continue
        if v.is_prerelease and not include_prereleases:
            continue
        wheels = [f for f in files if f["packagetype"] == "bdist_wheel"]
        if not wheels:
            continue
        best = min(wheels, key=lambda f: _platform_rank(f["filename"]))
        out.append(
            Release(
                project=project,
                version=version,
                wheel_url=urllib.parse.urljoin(base, best["url"]),
                wheel_name=best["filename"],
                size=int(best["size"]),
                yanked=bool(best.get("yanked")),
            )
        )
    out.sort(key=lambda r: Version(r.version))
    return out


class _RangeFile(io.RawIOBase):
    """A read-only, seekable file over HTTP range requests, with a small block cache."""

    BLOCK = 1 << 16

    def __init__(self, url: str, size: int) -> None:
        self.url, self.size, self.pos = url, size, 0
        self._blocks: dict[int, bytes] = {}

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = 0) -> int:
        base = {0: 0, 1: self.pos, 2: self.size}[whence]
        self.pos = base + offset
        return self.pos

    def _fetch(self, start: int, end: int) -> bytes:
        req = urllib.request.Request(self.url, headers={"Range": f"bytes={start}-{end - 1}"})
        with urllib.request.urlopen(req, timeout=TIMEOUT) as r:
            return bytes(r.read())

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        n = min(len(buffer), self.size - self.pos)
        if n <= 0:
            return 0
        if n > 4 * self.BLOCK:  # a large member: one request, uncached
            data = self._fetch(self.pos, self.pos + n)
        else:
            first, last = self.pos // self.BLOCK, (self.pos + n - 1) // self.BLOCK
            missing = [b for b in range(first, last + 1) if b not in self._blocks]
            if missing:
                lo, hi = missing[0], missing[-1]
                raw = self._fetch(lo * self.BLOCK, min(self.size, (hi + 1) * self.BLOCK))
                for b in range(lo, hi + 1):
                    off = (b - lo) * self.BLOCK
                    self._blocks[b] = raw[off : off + self.BLOCK]
            joined = b"".join(self._blocks[b] for b in range(first, last + 1))
            start = self.pos - first * self.BLOCK
            data = joined[start : start + n]
        buffer[: len(data)] = data
        self.pos += len(data)
        return len(data)


class Wheel:
    """The members of one released wheel, read lazily and cached on disk."""

    def __init__(self, release: Release) -> None:
        self.release = release
        key = hashlib.sha256(release.wheel_url.encode()).hexdigest()[:16]
        self._dir = CACHE / release.project / f"{release.version}-{key}"
        self._zip: zipfile.ZipFile | None = None
        self._names: list[str] | None = None

    def _open(self) -> zipfile.ZipFile:
        if self._zip is None:
            raw = _RangeFile(self.release.wheel_url, self.release.size)
            self._zip = zipfile.ZipFile(io.BufferedReader(raw, buffer_size=1 << 16))
        return self._zip

    def names(self) -> list[str]:
        """Every member path in the wheel."""
        if self._names is None:
            listing = self._dir / "_names.json"
            if listing.is_file():
                self._names = json.loads(listing.read_text())
            else:
                self._names = self._open().namelist()
                self._dir.mkdir(parents=True, exist_ok=True)
                listing.write_text(json.dumps(self._names))
        return self._names

    def read(self, member: str) -> bytes | None:
        """One member's bytes, or None when the wheel has no such member."""
        cached = self._dir / "files" / member
        if cached.is_file():
            return cached.read_bytes()
        if member not in self.names():
            return None
        data = self._open().read(member)
        cached.parent.mkdir(parents=True, exist_ok=True)
        cached.write_bytes(data)
        return data

    def text(self, member: str) -> str | None:
        data = self.read(member)
        return None if data is None else data.decode("utf-8", "replace")

    def glob(self, suffix: str) -> Iterator[str]:
        """Member paths ending with `suffix` (e.g. 'envs.py')."""
        return (n for n in self.names() if n.endswith(suffix))
