"""List every release of tensorrt-llm on the package index and what it ships there.

TensorRT-LLM's wheels are published on NVIDIA's own index (pypi.nvidia.com); the package index
(PyPI) holds, for every release, only a small sdist whose setup fetches the wheel from there. So
no release's source can be read from the package index, and profiles/trtllm.yaml cites the
NVIDIA/TensorRT-LLM sources instead. This script records that fact per release (so a release
that one day ships a wheel on the index shows up) and the list of releases, from which
profiles/releases.yaml takes the newest (tools/extract/releases.py).

    python3 tools/extract/trtllm.py     # writes tools/extract/data/trtllm.json

Network: the index's JSON API only (one request). Output: sorted keys, no timestamps.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from packaging.version import InvalidVersion, Version
from wheels import INDEX, _get_json

PROJECT = "tensorrt-llm"
OUT = Path(__file__).resolve().parent / "data" / "trtllm.json"


def extract(index: dict[str, Any]) -> dict[str, Any]:
    """The record of every release in the index's JSON document for the project."""
    releases: dict[str, Any] = {}
    for version, files in index["releases"].items():
        try:
            Version(version)
        except InvalidVersion:
            continue
        kinds = sorted({f["packagetype"] for f in files})
        releases[version] = {
            "files": [
                {"kind": f["packagetype"], "size": int(f["size"]), "yanked": bool(f.get("yanked"))}
                for f in sorted(files, key=lambda f: f["filename"])
            ],
            "has_wheel": "bdist_wheel" in kinds,
        }
    covers = sorted(releases, key=Version)
    return {
        "project": PROJECT,
        "extracted_by": "tools/extract/trtllm.py",
        "covers": covers,
        "with_wheel": [v for v in covers if releases[v]["has_wheel"]],
        "releases": {v: releases[v] for v in covers},
    }


def main() -> None:
    data = extract(_get_json(INDEX.format(name=PROJECT)))
    OUT.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"{PROJECT}: {len(data['covers'])} releases, {len(data['with_wheel'])} with a wheel")


if __name__ == "__main__":
    main()
