"""Installed versions of the packages that decide the FP4 paths, read from their metadata.

Nothing is imported: versions come from the `.dist-info` directories `importlib.metadata` would
find (one listing per search-path entry, one METADATA read per name found), and torch's CUDA
build from the text of `torch/version.py`. `importlib.metadata` itself (20 ms of imports: the
email parser, zipfile) is asked only where its answer could differ from that plain reading: a
zip or egg on the path, two dist-infos for one name, metadata that is not a plain header block.
"""

from __future__ import annotations

import functools
import importlib.machinery
import importlib.util
import os
import re
import sys
from collections.abc import Iterable, Sequence

from fp4doctor.facts import PackageFacts, canonical_name
from fp4doctor.shipped import profiles_dir

# The distributions every probe looks up, whatever the profiles read: the engines (to pick a
# target) and the libraries a snapshot should carry. `probe` adds every package a shipped
# profile reads (`profile_packages`), `check` its own profile's. `tensorrt_llm` is an older
# spelling of `tensorrt-llm`; both normalise to one key.
PACKAGES: tuple[str, ...] = (
    "torch",
    "flashinfer-python",
    "flashinfer-cubin",
    "flashinfer-jit-cache",
    "nvidia-cudnn-cu12",
    "nvidia-cudnn-cu13",
    "nvidia-cudnn-frontend",
    "nvidia-cutlass-dsl",
    "vllm",
    "sglang",
    "sgl-kernel",
    "tensorrt-llm",
    "tensorrt_llm",
    "fbgemm-gpu",
    "fbgemm-gpu-genai",
    "b12x",
)
# Distributions split by CUDA build or platform under one prefix: every installed name with it
# is recorded. nvidia-cutlass-dsl 4.x is a meta package whose code is in
# nvidia-cutlass-dsl-libs-base, -libs-cu12, -libs-cu13 and -libs-qnx-* (its Requires-Dist in the
# 4.8.0 wheel).
SPLITS: tuple[str, ...] = ("nvidia-cutlass-dsl-libs-",)

_ASSIGNMENT = re.compile(
    r"^(?P<name>__version__|cuda|git_version|hip)\s*(?::[^=]*)?=\s*(?P<value>.+?)\s*(?:#.*)?$", re.M
)


_SEPARATORS = re.compile(r"[-_.]+")
_HEADER_NAME = re.compile(r"[\041-\071\073-\176]+:")  # email.feedparser's, name not empty
_LINE_BREAKS = "\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"  # str.splitlines breaks there too
_ABSENT = ""  # `_SiteIndex.version`: no distribution of that name on the path
_LISTED: dict[tuple[str, int], dict[str, list[str]]] = {}  # (entry, its mtime) -> listing


def _normalize(name: str) -> str:
    """importlib.metadata's `Prepared.normalize`: PEP 503, with dashes as underscores."""
    return _SEPARATORS.sub("-", name).lower().replace("-", "_")


class _SiteIndex:
    """The dist-info directories of each search-path entry, listed once, keyed as
    `importlib.metadata`'s `Lookup` keys them. `version` gives what
    `importlib.metadata.distributions(name=...)`'s first match would say for the plain case, or
    None where only importlib.metadata can say (then it is asked, for that name)."""

    def __init__(self, path: Sequence[str]) -> None:
        self.path = list(path)
        self.listed: dict[int, dict[str, list[str]] | None] = {}
        # A finder other than the standard path finder could find distributions of its own.
        self.plain = all(
            finder is importlib.machinery.PathFinder
            for finder in sys.meta_path
            if getattr(finder, "find_distributions", None) is not None
        )

    def _entry(self, position: int) -> dict[str, list[str]] | None:
        if position not in self.listed:
            self.listed[position] = self._list(self.path[position])
        return self.listed[position]

    @staticmethod
    def _list(root: str) -> dict[str, list[str]] | None:
        """The entry's dist-infos by key; one listing per process while the directory is
        unchanged (its mtime), shared by every lookup (the probe's, then a profile's)."""
        if os.path.basename(root).lower().endswith(".egg"):
            return None  # importlib.metadata reads an egg's own egg-info
        try:
            stamp = (root, os.stat(root or ".").st_mtime_ns)
        except Exception:
            stamp = None
        if stamp is not None and stamp in _LISTED:
            return _LISTED[stamp]
        try:
            children = os.listdir(root or ".")
        except Exception:
            # Nothing there is nothing found; anything else may be a zip: importlib.metadata.
            return None if os.path.exists(root or ".") else {}
        found: dict[str, list[str]] = {}
        for child in children:
            low = child.lower()
            if low.endswith((".dist-info", ".egg-info")):
                key = _normalize(low.rpartition(".")[0].partition("-")[0])
                found.setdefault(key, []).append(child)
        if stamp is not None:
            _LISTED[stamp] = found
        return found

    def dist_info(self, name: str) -> str | None:
        """The `.dist-info` directory importlib.metadata's first match would read, `_ABSENT`,
        or None: ask importlib.metadata."""
        if not self.plain or not name:
            return None
        key = _normalize(name)
        for position, root in enumerate(self.path):
            entry = self._entry(position)
            if entry is None:
                return None
            matches = entry.get(key)
            if not matches:
                continue
            if len(matches) > 1 or not matches[0].lower().endswith(".dist-info"):
                return None
            return os.path.join(root, matches[0])
        return _ABSENT

    def named(self, prefix: str) -> list[str]:
        """The distributions whose name starts with `prefix`, as found in the plain listings
        (an entry only importlib.metadata can read, a zip or an egg, is not searched)."""
        key = _normalize(prefix)
        found: list[str] = []
        for position in range(len(self.path)):
            entry = self._entry(position)
            found += [k.replace("_", "-") for k in entry or {} if k.startswith(key)]
        return sorted(set(found))

    def version(self, name: str) -> str | None:
        """The version, `_ABSENT`, or None: ask importlib.metadata."""
        found = self.dist_info(name)
        if found is None or found == _ABSENT:
            return found
        return _plain_version(os.path.join(found, "METADATA"))


def installed_files(name: str) -> tuple[str, list[str]] | None:
    """The distribution's `.dist-info` directory and the paths its RECORD lists (relative to
    the directory above it), read as importlib.metadata's `files()` reads them in the plain
    case; None where only importlib.metadata can say (no single dist-info, no RECORD, a quoted
    path). Raises LookupError when `name` is not installed."""
    found = _SiteIndex(sys.path).dist_info(name)
    if found == _ABSENT:
        raise LookupError(f"{name} is not installed")
    if found is None:
        return None
    try:
        with open(os.path.join(found, "RECORD"), encoding="utf-8") as handle:
            lines = [line for line in handle.read().splitlines() if line]
    except (OSError, UnicodeDecodeError):
        return None
    if any(line.startswith('"') or line.count(",") != 2 for line in lines):
        return None  # CSV quoting, or a comma in a path: the csv module's reading, importlib's
    return found, [line.partition(",")[0] for line in lines]


def dist_info_dirs(path: Sequence[str], names: Iterable[str]) -> dict[str, str]:
    """The `.dist-info` (or `.egg-info`) directory importlib.metadata would read for each of
    `names` installed on the search path `path`, by canonical name; absent names are left out."""
    index = _SiteIndex(list(path))
    found: dict[str, str] = {}
    for name in names:
        try:
            plain = index.dist_info(name)
        except Exception:  # an odd path entry: importlib.metadata's answer
            plain = None
        if plain == _ABSENT:
            continue
        if plain is None:
            import importlib.metadata

            try:
                dist = next(
                    iter(importlib.metadata.distributions(name=name, path=list(path))), None
                )
            except Exception:
                continue
            where = getattr(dist, "_path", None)
            if where is None:
                continue
            plain = str(where)
        found[canonical_name(name)] = plain
    return found


def _plain_version(metadata: str) -> str | None:
    """The Version header of a METADATA file when it reads as a plain header block (what the
    email parser then returns for it), else None."""
    try:
        with open(metadata, encoding="utf-8") as handle:
            text = handle.read()  # all of it: a decoding error anywhere is importlib's to report
    except Exception:
        return None
    lines = text.split("\n")
    for number, line in enumerate(lines):
        if not line:
            return None  # the headers end without a Version: importlib.metadata says why
        if any(c in line for c in _LINE_BREAKS):
            return None
        if line[0] in " \t":
            continue  # a folded line of an earlier header
        if _HEADER_NAME.match(line) is None:
            return None
        header, _, value = line.partition(":")
        if header.lower() != "version":
            continue
        following = lines[number + 1] if number + 1 < len(lines) else ""
        if following[:1] in (" ", "\t"):
            return None  # folded: leave the unfolding to the email parser
        version = value.lstrip(" \t")
        return version or None
    return None


def profile_packages() -> tuple[str, ...]:
    """Every distribution a shipped profile's rules read (every target, the modules it includes
    and the known problems attached), so that a `probe --json` snapshot replays as this host
    would be judged. Computed once per version of the profile files, and kept between runs
    beside the parsed profiles (fp4doctor/cache.py), read without importing the profile package."""
    return _profile_packages()


@functools.cache
def _profile_packages() -> tuple[str, ...]:
    from fp4doctor import cache

    base = profiles_dir()
    files = sorted(str(p) for p in (*base.glob("*.yaml"), *base.glob("common/*.yaml")))
    if not files:
        return ()

    def build() -> tuple[tuple[str, ...], list[str]]:
        from fp4doctor import profile  # its imports, and the parser: only when not kept

        names: set[str] = set()
        for target in profile.builtin_names():
            names |= {canonical_name(n) for n in profile.load(target).packages()}
        return tuple(sorted(names)), files[1:]

    # The kind names the files, so that a profile added or removed is a new entry.
    kind = "packages:" + ",".join(os.path.relpath(f, base) for f in files)
    try:
        return cache.cached(kind, files[0], build)
    except Exception:  # a broken shipped profile: `check` says so; the probe keeps the core list
        return ()


def probe_packages(
    path: Sequence[str] | None = None,
    names: Iterable[str] = PACKAGES,
    splits: Iterable[str] = SPLITS,
) -> PackageFacts:
    """Versions of `names`, and of every distribution named with a prefix in `splits`, that are
    installed, and torch's CUDA/HIP build facts.

    `path` is the list of directories to search (default `sys.path`); a distribution whose
    metadata cannot be read is reported in `errors`, never raised.
    """
    search = None if path is None else list(path)
    versions: dict[str, str] = {}
    errors: dict[str, str] = {}
    index = _SiteIndex(sys.path if search is None else search)
    wanted = list(names)
    for prefix in splits:
        try:
            wanted += index.named(prefix)
        except Exception:  # an odd path entry: the named packages are still read
            continue
    for name in wanted:
        key = canonical_name(name)
        if key in versions or key in errors:
            continue
        try:
            plain = index.version(name)
        except Exception:  # an odd path entry: importlib.metadata's answer, and its error
            plain = None
        if plain == _ABSENT:
            continue
        if plain is not None:
            versions[key] = plain
            continue
        import importlib.metadata  # only where the plain reading cannot answer

        try:
            found = (
                importlib.metadata.distributions(name=name)
                if search is None
                else importlib.metadata.distributions(name=name, path=search)
            )
            dist = next(iter(found), None)
        except Exception as exc:  # a broken path entry; keep the other packages
            errors[key] = f"cannot search for {name}: {type(exc).__name__}: {exc}"
            continue
        if dist is None:
            continue
        where = getattr(dist, "_path", None)  # the .dist-info directory, for the message
        try:
            version = dist.version
        except Exception as exc:
            errors[key] = f"{where}: cannot read the metadata: {type(exc).__name__}: {exc}"
            continue
        if not isinstance(version, str) or not version:
            errors[key] = f"{where}: the metadata has no Version"
            continue
        versions[key] = version

    torch_cuda = torch_git = torch_hip = None
    if "torch" in versions:
        try:
            fields = torch_build(search)
            torch_cuda, torch_git, torch_hip = (
                fields.get("cuda"),
                fields.get("git_version"),
                fields.get("hip"),
            )
            # torch.__version__ as torch reports it ("2.11.0+cu130"); some wheels' metadata
            # drop the local part ("2.11.0").
            if fields.get("__version__"):
                versions["torch"] = str(fields["__version__"])
        except Exception as exc:
            errors["torch/version.py"] = f"{type(exc).__name__}: {exc}"
    return PackageFacts(
        versions=versions,
        torch_cuda=torch_cuda,
        torch_git_version=torch_git,
        torch_hip=torch_hip,
        errors=errors,
    )


def torch_dir(path: Sequence[str] | None = None) -> str | None:
    """The directory of the `torch` package that `import torch` would use, without importing it."""
    if path is None:
        spec = importlib.util.find_spec("torch")
    else:
        spec = importlib.machinery.PathFinder.find_spec("torch", list(path))
    if spec is None or not spec.submodule_search_locations:
        return None
    return str(next(iter(spec.submodule_search_locations)))


def torch_build(path: Sequence[str] | None = None) -> dict[str, str | None]:
    """`cuda`, `git_version` and `hip` as torch/version.py writes them (None where it says None)."""
    directory = torch_dir(path)
    if directory is None:
        raise FileNotFoundError("torch is installed but its package directory is not on the path")
    version_py = os.path.join(directory, "version.py")
    with open(version_py, encoding="utf-8") as handle:
        text = handle.read()
    return parse_torch_version_py(text)


def parse_torch_version_py(text: str) -> dict[str, str | None]:
    """Read the simple assignments of torch/version.py; values are string literals or None."""
    found: dict[str, str | None] = {}
    for match in _ASSIGNMENT.finditer(text):
        value = match.group("value")
        if value == "None":
            found[match.group("name")] = None
        elif len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            found[match.group("name")] = value[1:-1]
    return found
