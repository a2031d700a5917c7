"""Which versions of each package a fix may pin exist on the package index (PyPI), written to
`profiles/index.json` (shipped: `fp4doctor/released.py` reads it). A fix that names
`flashinfer-cubin==0.6.16.post3` when PyPI has no such release would fail at `pip install`:
the rules consult this list before they print one.

    python3 -m tools.extract.index          # writes profiles/index.json (network: PyPI only)

Sorted keys and versions, no timestamp beyond the date it was read, so a re-run over the same
index writes the same bytes; the date says how old the list is.
"""

from __future__ import annotations

import datetime
import json
import sys
from pathlib import Path

from packaging.version import InvalidVersion, Version

from tools.extract.wheels import INDEX, _get_json

OUT = Path(__file__).resolve().parent.parent.parent / "profiles" / "index.json"
#: Every package a shipped fix can pin (same_version, fixed_in, package requirements).
PACKAGES = (
    "flashinfer-python",
    "flashinfer-cubin",
    "flashinfer-jit-cache",
    "nvidia-cudnn-frontend",
    "nvidia-cudnn-cu12",
    "nvidia-cudnn-cu13",
    "nvidia-cutlass-dsl",
    "vllm",
    "sglang",
    "tensorrt-llm",
    "torch",
    "triton",
)


def releases(project: str) -> tuple[list[str], list[str]] | None:
    """The released versions that have a file, oldest first, and those of them with no wheel
    (an sdist only: every tensorrt-llm release, whose wheels are on NVIDIA's own index); None
    when PyPI has no project."""
    try:
        data = _get_json(INDEX.format(name=project))
    except OSError:
        return None
    raw = data.get("releases")
    assert isinstance(raw, dict)
    out, wheelless = [], []
    for version, files in raw.items():
        try:
            Version(version)
        except InvalidVersion:
            continue
        if files and not all(f.get("yanked") for f in files):
            out.append(version)
            if not any(f.get("packagetype") == "bdist_wheel" for f in files):
                wheelless.append(version)
    return sorted(out, key=Version), sorted(wheelless, key=Version)


def versions(project: str) -> list[str] | None:
    """The released versions that have a file, oldest first; None when PyPI has no project."""
    found = releases(project)
    return None if found is None else found[0]


def main() -> int:
    read = {name: releases(name) for name in PACKAGES}
    packages = {k: v[0] for k, v in read.items() if v is not None}
    doc = {
        "read": datetime.date.today().isoformat(),
        "source": "https://pypi.org/pypi/<name>/json (releases with a file, yanked ones left out)",
        "packages": packages,
        "absent": sorted(k for k, v in read.items() if v is None),
        # The releases with no wheel on PyPI (nothing to read there, pip builds or fails).
        "without_wheel": {k: v[1] for k, v in read.items() if v is not None and v[1]},
    }
    OUT.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    for name, found in sorted(packages.items()):
        print(f"{name}: {len(found) if found else 'not on PyPI'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
