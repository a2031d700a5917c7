"""Where a checkpoint's files are: a local directory, the Hugging Face cache (offline), or, only
when asked, the Hub itself through the optional `huggingface_hub` extra.

The cache layout is huggingface_hub's (`file_download.py`, `constants.py`):
`$HF_HUB_CACHE` (else `$HF_HOME/hub`, else `$XDG_CACHE_HOME/huggingface/hub`, else
`~/.cache/huggingface/hub`) / `models--ORG--NAME` / `snapshots/REV/`, with `refs/main` naming
the revision. Reading the cache needs no network and no import of huggingface_hub.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fp4doctor.checkpoint.errors import CheckpointError, NotHere
from fp4doctor.checkpoint.files import parse_json, read_bytes
from fp4doctor.checkpoint.safetensors import TensorInfo

REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")
REVISION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
MAX_JSON_BYTES = 16_000_000
HUB_FILES = ("config.json", "hf_quant_config.json")


@dataclass(frozen=True)
class Remote:
    """What the Hub gave: the small JSON files, and every shard's header (no tensor data)."""

    repo_id: str
    json_files: Mapping[str, Any]
    tensors: Mapping[str, TensorInfo] = field(default_factory=dict)


def hub_cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """huggingface_hub's cache directory, as its constants module computes it."""
    env = os.environ if environ is None else environ
    if env.get("HF_HUB_CACHE"):
        return Path(env["HF_HUB_CACHE"]).expanduser()
    if env.get("HF_HOME"):
        return Path(env["HF_HOME"]).expanduser() / "hub"
    xdg = env.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "huggingface" / "hub"


def cached_snapshot(repo_id: str, environ: Mapping[str, str] | None = None) -> Path | None:
    """The cached snapshot of `repo_id` (`refs/main`, else the only snapshot), or None."""
    repo = hub_cache_dir(environ) / ("models--" + repo_id.replace("/", "--"))
    snapshots = repo / "snapshots"
    ref = repo / "refs" / "main"
    if ref.is_file():
        revision = read_bytes(ref, 256, "a revision").decode("utf-8", "replace").strip()
        # A commit hash: a ref naming "../x" must not lead out of the cache.
        if REVISION.match(revision) and (snapshots / revision).is_dir():
            return snapshots / revision
    found = sorted(p for p in snapshots.glob("*") if p.is_dir()) if snapshots.is_dir() else []
    return found[0] if len(found) == 1 else None


def locate(model: str, *, hub: bool = False) -> Path | Remote:
    """The checkpoint `model` names: a directory, a cached repo id, or (with `hub`) the Hub."""
    if not model:  # Path("") is the current directory: never read it unasked
        raise CheckpointError("--model is empty: give a checkpoint directory or ORG/NAME")
    path = Path(model).expanduser()
    if path.is_dir():
        return path
    if path.exists():
        raise CheckpointError(
            f"{model}: is a file; --model takes a checkpoint directory or a repo id"
        )
    if not REPO_ID.match(model):
        raise NotHere(f"{model}: no such directory here (and not a Hugging Face repo id ORG/NAME)")
    cached = cached_snapshot(model)
    if cached is not None:
        return cached
    if hub:
        return fetch_remote(model)
    raise NotHere(
        f"{model}: no such directory, and not in the Hugging Face cache ({hub_cache_dir()}); "
        "download it (huggingface-cli download --include '*.json' ...) or pass --hub to read "
        "its configs and safetensors headers from the Hub"
    )


def fetch_remote(repo_id: str) -> Remote:
    """Configs and safetensors headers from the Hub (HTTP range reads: no weights downloaded).
    Needs the optional extra: pip install 'fp4doctor[hub]'."""
    try:
        import huggingface_hub as hf  # the optional extra: never imported unless --hub is given
    except ImportError:
        raise CheckpointError(
            f"{repo_id}: --hub needs huggingface_hub (pip install 'fp4doctor[hub]')"
        ) from None
    json_files: dict[str, Any] = {}
    try:
        for name in HUB_FILES:
            try:
                local = hf.hf_hub_download(repo_id, name)
            except hf.errors.EntryNotFoundError:
                continue
            json_files[name] = load_json(Path(local))
        meta = hf.get_safetensors_metadata(repo_id)
    except CheckpointError:
        raise
    except Exception as exc:  # network, auth, a repo that does not exist: one line, not a trace
        raise CheckpointError(f"{repo_id}: cannot be read from the Hub ({exc})") from None
    tensors = {
        name: TensorInfo(name, info.dtype, tuple(info.shape))
        for file_meta in meta.files_metadata.values()
        for name, info in file_meta.tensors.items()
    }
    return Remote(repo_id, json_files, tensors)


def load_json(path: Path) -> Any:
    """A small JSON file, or a CheckpointError naming it."""
    return parse_json(read_bytes(path, MAX_JSON_BYTES, "a config file"), path, "a config file")
