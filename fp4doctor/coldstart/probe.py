"""The cold-start caches on this host, read as directories and metadata: nothing is imported
(no torch, no flashinfer), no library is loaded, and a file is opened only to read an autotune
cache's JSON or a prebuilt module's fatbin headers (probe/archs.py).

- FlashInfer's JIT workspace: `$FLASHINFER_WORKSPACE_BASE` (else the home directory)
  `/.cache/flashinfer/<version>/<arch key>/cached_ops/<module>/<module>.so`
  (flashinfer/jit/env.py `_get_workspace_dir_name`, flashinfer/jit/core.py `jit_library_path`).
- Prebuilt modules: flashinfer-jit-cache's RECORD, `.../jit_cache/<module>/<module>.so`
  (flashinfer/jit/core.py `aot_path`); the GPU code of the FP4 modules the rules name.
- vLLM's FlashInfer autotune cache: `$VLLM_FLASHINFER_AUTOTUNE_CACHE_DIR`, else
  `$VLLM_CACHE_ROOT` (else `$XDG_CACHE_HOME/vllm`, else `~/.cache/vllm`)
  `/flashinfer_autotune_cache` (vllm/model_executor/warmup/flashinfer_autotune_cache.py), and
  the `_metadata` FlashInfer writes into each file (flashinfer docs/autotuning.rst).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TypeVar

from fp4doctor.facts import AutotuneFile, ColdStartFacts, PackageFacts, PrebuiltKernels
from fp4doctor.shipped import profiles_dir
from fp4doctor.textfile import UnreadableText, read_bytes

T = TypeVar("T")

JIT_CACHE_DIST = "flashinfer-jit-cache"
AUTOTUNE_FILE_PREFIX = "autotune_configs"
MAX_AUTOTUNE_FILES = 64  # a shared cache directory can hold many models' files: enough to judge
MAX_AUTOTUNE_BYTES = 16 << 20  # a bigger file is not read (its size says it is not empty)
MAX_DEPTH = 4  # <flashinfer version>/<arch key>/<config hash>/<file>


def probe_cold_start(
    env: Mapping[str, str], packages: PackageFacts, modules: Iterable[str] = ()
) -> ColdStartFacts:
    """The JIT workspace, the prebuilt modules (the GPU code of `modules` among them) and the
    autotune cache, as seen under `env`. A part that cannot be read is a reason in `errors`."""
    errors: dict[str, str] = {}

    def guarded(name: str, probe: Callable[[], T], fallback: T) -> T:
        return _guarded(errors, name, probe, fallback)

    home = env.get("HOME") or os.path.expanduser("~")
    base = env.get("FLASHINFER_WORKSPACE_BASE") or home
    cache_dir = Path(base) / ".cache" / "flashinfer"
    no_built: dict[str, list[str]] = {}
    built = guarded("workspace", lambda: _built(cache_dir), no_built)
    wanted = set(modules)
    no_prebuilt: list[PrebuiltKernels] = []
    prebuilt = guarded("prebuilt", lambda: _prebuilt(packages, wanted), no_prebuilt)
    root = autotune_root(env, home)
    no_files: list[AutotuneFile] = []
    files = guarded("autotune", lambda: _autotune_files(root), no_files)
    managed = managed_root(env, home, cache_dir)
    stores = guarded("managed_autotune", lambda: _managed_stores(managed), no_files)
    return ColdStartFacts(
        flashinfer_cache_dir=str(cache_dir),
        built=built,
        prebuilt=prebuilt,
        autotune_root=str(root),
        autotune_files=files,
        managed_root=str(managed),
        managed_stores=stores,
        errors=errors,
    )


# A `module: NAME` in profiles/coldstart.yaml. The probe reads the file's text this way rather than
# parsing it (as probe/archs.py `engine_modules` reads the profiles): the parser and the profile
# package cost more than the whole probe, and only the names are needed here.
_MODULE = re.compile(r"\bmodule:[ \t]*[\"']?([A-Za-z0-9_]+)")


def _guarded(errors: dict[str, str], name: str, probe: Callable[[], T], fallback: T) -> T:
    """`probe()`, or `fallback` with the reason in `errors[name]`: a part that cannot be read is
    a fact (as in probe/__init__.py), never a crash of the whole probe."""
    try:
        return probe()
    except Exception as exc:
        errors[name] = f"{type(exc).__name__}: {exc}"
        return fallback


def rule_modules(path: Path | None = None) -> tuple[str, ...]:
    """The JIT modules the shipped cold-start rules name (their prebuilt GPU code is scanned)."""
    text = (path or profiles_dir() / "coldstart.yaml").read_text(encoding="utf-8")
    return tuple(dict.fromkeys(_MODULE.findall(text)))


def autotune_root(env: Mapping[str, str], home: str) -> Path:
    """vLLM's FlashInfer autotune cache directory under `env` (its override, else under
    VLLM_CACHE_ROOT): vllm/model_executor/warmup/flashinfer_autotune_cache.py (0.25.0+)."""
    override = env.get("VLLM_FLASHINFER_AUTOTUNE_CACHE_DIR")
    if override:
        return Path(_expand(override, home))
    xdg = env.get("XDG_CACHE_HOME") or os.path.join(home, ".cache")
    root = env.get("VLLM_CACHE_ROOT") or os.path.join(xdg, "vllm")
    return Path(_expand(root, home)) / "flashinfer_autotune_cache"


def managed_root(env: Mapping[str, str], home: str, cache_dir: Path) -> Path:
    """FlashInfer's managed autotune store root (flashinfer/autotune_cache.py
    `get_default_cache_root`, 0.7.0rc3+): vLLM's override when set (it passes it as cache_root,
    kernel_warmup.py `resolve_flashinfer_autotune_v2_root`), else FlashInfer's own variable, else
    `<FLASHINFER_CACHE_DIR>/autotune`."""
    for name in ("VLLM_FLASHINFER_AUTOTUNE_CACHE_DIR", "FLASHINFER_AUTOTUNE_CACHE_DIR"):
        if env.get(name):
            return Path(_expand(env[name], home))
    return cache_dir / "autotune"


def _expand(path: str, home: str) -> str:
    return home + path[1:] if path == "~" or path.startswith("~/") else path


def _dirs(path: Path) -> list[str]:
    try:
        return sorted(e.name for e in os.scandir(path) if e.is_dir())
    except FileNotFoundError:
        return []


def _built(cache_dir: Path) -> dict[str, list[str]]:
    """`<version>/<arch key>` -> the modules with a built library in that workspace."""
    found: dict[str, list[str]] = {}
    for version in _dirs(cache_dir):
        for arch in _dirs(cache_dir / version):
            ops = cache_dir / version / arch / "cached_ops"
            names = [m for m in _dirs(ops) if (ops / m / f"{m}.so").is_file()]
            if names or (ops.is_dir()):
                found[f"{version}/{arch}"] = names
    return found


def _prebuilt(packages: PackageFacts, wanted: set[str]) -> list[PrebuiltKernels]:
    """flashinfer-jit-cache's modules from its RECORD, and the GPU code of the wanted ones."""
    version = packages.version(JIT_CACHE_DIST)
    if version is None:
        return []
    from fp4doctor.probe.archs import scan
    from fp4doctor.probe.packages import installed_files

    listed = installed_files(JIT_CACHE_DIST)
    if listed is None:
        return [PrebuiltKernels(JIT_CACHE_DIST, version)]
    dist_info, files = listed
    base = Path(dist_info).parent
    modules: dict[str, str] = {}
    for f in files:
        parts = f.split("/")
        # .../jit_cache/<module>/<module>.so, as flashinfer/jit/core.py's aot_path names it
        if len(parts) >= 3 and parts[-3] == "jit_cache" and parts[-1] == f"{parts[-2]}.so":
            modules.setdefault(parts[-2], f)
    archs = {m: scan(base / modules[m]) for m in sorted(wanted & set(modules))}
    return [PrebuiltKernels(JIT_CACHE_DIST, version, sorted(modules), archs)]


def _autotune_files(root: Path) -> list[AutotuneFile]:
    """The autotune cache files under `root` (a few levels down), with their metadata."""
    found: list[AutotuneFile] = []
    if not root.is_dir():
        return found
    for top, dirs, names in os.walk(root):
        depth = len(Path(top).relative_to(root).parts)
        if depth >= MAX_DEPTH:
            dirs[:] = []
        dirs.sort()
        for name in sorted(names):
            if name.startswith(AUTOTUNE_FILE_PREFIX) and name.endswith(".json"):
                found.append(_autotune_file(Path(top) / name, root))
                if len(found) >= MAX_AUTOTUNE_FILES:
                    return found
    return found


def _managed_stores(root: Path) -> list[AutotuneFile]:
    """Each `v2/<environment hash>/manifest.json` under `root`, with its entries counted."""
    found: list[AutotuneFile] = []
    for env_hash in _dirs(root / "v2")[:MAX_AUTOTUNE_FILES]:
        store = root / "v2" / env_hash
        manifest = _autotune_file(store / "manifest.json", root, manifest=True)
        try:
            entries = sum(1 for e in os.scandir(store / "entries") if e.name.endswith(".json"))
        except FileNotFoundError:
            entries = 0
        found.append(AutotuneFile(manifest.path, manifest.metadata, entries, manifest.error))
    return found


def _autotune_file(path: Path, root: Path, manifest: bool = False) -> AutotuneFile:
    """One autotune file and FlashInfer's environment in it: a v1 file's `_metadata`, or a
    managed store's manifest (the same fields, at the top)."""
    relative = path.relative_to(root).as_posix()
    try:
        # A shared cache can hold anything under that name: a FIFO (an open that waits for a
        # writer), a link to /dev/zero (a read without end). Read as textfile reads user files.
        content = read_bytes(path, limit=MAX_AUTOTUNE_BYTES, too_large="not read")
    except UnreadableText as exc:
        return AutotuneFile(relative, error=str(exc).removeprefix(f"{path}: "))
    try:
        data = json.loads(content)
    except (ValueError, RecursionError) as exc:
        return AutotuneFile(relative, error=f"{type(exc).__name__}: {exc}")
    if not isinstance(data, dict):
        return AutotuneFile(relative, error="not a JSON object")
    raw = data if manifest else data.get("_metadata")
    metadata = {str(k): str(v) for k, v in raw.items()} if isinstance(raw, dict) else {}
    return AutotuneFile(relative, metadata, sum(1 for k in data if k != "_metadata"))
