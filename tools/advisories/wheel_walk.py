"""List the FP4 files that change between consecutive released wheels: a ledger's candidates
where no git history is at hand (SGLang, vLLM).

    python tools/advisories/wheel_walk.py sglang WHEEL_DIR > candidates.tsv

WHEEL_DIR holds `pip download --no-deps PROJECT==V` wheels of consecutive releases, or one folder
per release (named by its version) holding the FP4 files extracted from that release's wheel,
for wheels too large to keep (vLLM's are ~400 MB). A candidate is
one (release range, file) whose text differs between the two wheels and whose path matches the
project's FP4_PATHS; its row says how many lines were added and removed and whether an added line
names a defect (the words walk.py's ledger scans messages for). Wheels carry no commits, so a row
stands for every change to that file in that range; coverage counted over these rows is
file-level, not commit-level, and tools/advisories/README.md says so.
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path

from packaging.version import InvalidVersion, Version

FP4_PATHS: dict[str, re.Pattern[str]] = {
    "sglang": re.compile(
        r"^sglang/srt/layers/quantization/(modelopt_quant|fp4_utils|fp4|nvfp4[^/]*)\.py$"
        r"|^sglang/srt/layers/quantization/compressed_tensors/.*(nvfp4|fp4)[^/]*\.py$"
        r"|^sglang/srt/layers/moe/([^/]*(flashinfer|cutedsl|fp4)[^/]*|cutlass_moe|utils)\.py$"
        r"|^sglang/srt/layers/moe/moe_runner/(flashinfer_[^/]*|cutlass[^/]*|marlin|runner)\.py$"
    ),
    "vllm": re.compile(
        r"^vllm/model_executor/layers/quantization/(modelopt|utils/nvfp4[^/]*|utils/flashinfer_fp4_moe)\.py$"
        r"|^vllm/model_executor/layers/quantization/compressed_tensors/.*(nvfp4|w4a4)[^/]*\.py$"
        r"|^vllm/model_executor/layers/fused_moe/.*(flashinfer|cutlass|nvfp4|oracle)[^/]*\.py$"
        r"|^vllm/model_executor/kernels/linear/nvfp4/[^/]*\.py$|^vllm/utils/flashinfer\.py$"
    ),
}
DEFECT = re.compile(
    r"\b(fix(es|ed)?|bug|crash|nan|wrong|incorrect|hang|illegal|workaround|WAR|regression)\b",
    re.IGNORECASE,
)


def _version(path: Path, project: str) -> Version | None:
    stem = path.name.split("-")
    if len(stem) < 2 or stem[0] != project:
        return None
    try:
        return Version(stem[1])
    except InvalidVersion:
        return None


def wheels(directory: Path, project: str) -> list[tuple[Version, Path]]:
    """The project's wheels (or extracted release folders) in the directory, oldest first."""
    found = {v: p for p in directory.glob("*.whl") if (v := _version(p, project)) is not None}
    for sub in directory.iterdir():
        if sub.is_dir():
            try:
                found.setdefault(Version(sub.name), sub)
            except InvalidVersion:
                continue
    return sorted(found.items())


def fp4_files(wheel: Path, project: str) -> dict[str, str]:
    """Path -> text of every FP4 file in one wheel or extracted release folder."""
    pattern = FP4_PATHS[project]
    if wheel.is_dir():
        return {
            name: (wheel / name).read_text(encoding="utf-8", errors="replace")
            for name in (p.relative_to(wheel).as_posix() for p in wheel.rglob("*.py"))
            if pattern.search(name)
        }
    with zipfile.ZipFile(wheel) as zf:
        return {
            name: zf.read(name).decode("utf-8", "replace")
            for name in zf.namelist()
            if pattern.search(name)
        }


def changes(old: dict[str, str], new: dict[str, str]) -> Iterator[tuple[str, int, int, bool]]:
    """(path, added, removed, an added line names a defect) for each changed FP4 file."""
    for name in sorted(set(old) | set(new)):
        a, b = old.get(name, ""), new.get(name, "")
        if a == b:
            continue
        added = removed = 0
        defect = False
        for line in difflib.unified_diff(a.splitlines(), b.splitlines(), lineterm="", n=0):
            if line.startswith("+") and not line.startswith("+++"):
                added += 1
                defect = defect or bool(DEFECT.search(line))
            elif line.startswith("-") and not line.startswith("---"):
                removed += 1
        yield name, added, removed, defect


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("project", choices=sorted(FP4_PATHS))
    parser.add_argument("wheel_dir", type=Path)
    args = parser.parse_args(argv)
    found = wheels(args.wheel_dir, args.project)
    if len(found) < 2:
        print(f"{args.wheel_dir}: fewer than two {args.project} wheels", file=sys.stderr)
        return 2
    print("range\tfile\tadded\tremoved\tdefect_words")
    prev_v, prev = found[0][0], fp4_files(found[0][1], args.project)
    for version, path in found[1:]:
        cur = fp4_files(path, args.project)
        for name, added, removed, defect in changes(prev, cur):
            print(f"{prev_v}..{version}\t{name}\t{added}\t{removed}\t{'yes' if defect else ''}")
        prev_v, prev = version, cur
    return 0


if __name__ == "__main__":
    sys.exit(main())
