"""Refresh the release data: read every tracked package's new releases, regenerate the data and
profiles/releases.yaml, and print what moved.

    python -m tools.extract.refresh            # every extractor, then releases.py
    python -m tools.extract.refresh --only vllm sglang

Each extractor (vllm.py, sglang.py, flashinfer.py) re-reads the package index and rewrites its
tools/extract/data/*.json, and index.py rewrites profiles/index.json (what PyPI holds); the
records of releases read before must come out byte for byte the same (a record that changes
is printed as CHANGED: an extractor changed, or a release was re-uploaded). For each new
release, the fields that differ from the release before it are printed. Then
tools/extract/releases.py rewrites profiles/releases.yaml (newest_known per engine, FlashInfer
pins the index lacks), and tools/extract/flags.py profiles/flags/*.json (every option of each
covered release's server parser, read by fp4doctor.command). Nothing in profiles/*.yaml is
edited: where a profile disagrees with the new data, tests/test_release_data*.py and
tests/test_moe_release_data.py fail at that release, which is the to-do list of the refresh.

The last run's report is kept in tools/extract/data/last-refresh.txt.

Exit 0 when nothing moved, 1 when the data changed (a new release, a changed record), 2 when an
extractor failed. stdout carries the report; the extractors' own output goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
# Extractor script -> the data file it writes, in the order they run (FlashInfer before the
# engines' pins are compared with its releases in releases.py).
EXTRACTORS = {
    "flashinfer": "flashinfer.json",
    "sglang": "sglang.json",
    "vllm": "vllm.json",
}
ROOT = HERE.parent.parent
INDEX = ROOT / "profiles" / "index.json"  # tools/extract/index.py: what PyPI holds, per package
DEPTH = 3  # how deep into a record the fields that moved are named
# Content hashes and file lists change with any edit upstream: not what a reader looks for.
NOISE = ("files", "files_read", "wheel", "source")


def _noise(key: str) -> bool:
    return key in NOISE or "sha" in key


def _load(name: str) -> dict[str, Any]:
    path = DATA / name
    if not path.is_file():
        return {"covers": [], "releases": {}}
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def moved(old: Any, new: Any, where: str = "", depth: int = DEPTH) -> list[str]:
    """The dotted paths (down to `depth`) at which two records differ."""
    if old == new:
        return []
    if depth == 0 or not (isinstance(old, dict) and isinstance(new, dict)):
        return [where or "."]
    out: list[str] = []
    for key in sorted(set(old) | set(new)):
        if _noise(str(key)):
            continue
        sub = f"{where}.{key}" if where else str(key)
        if key not in old:
            out.append(f"{sub} (new)")
        elif key not in new:
            out.append(f"{sub} (gone)")
        else:
            out += moved(old[key], new[key], sub, depth - 1)
    return out


def compare(name: str, before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """What moved in one data file, one line each."""
    lines: list[str] = []
    old_covers, new_covers = before.get("covers", []), after.get("covers", [])
    added = [v for v in new_covers if v not in old_covers]
    gone = [v for v in old_covers if v not in new_covers]
    records_b, records_a = before.get("releases", {}), after.get("releases", {})
    for v in gone:
        lines.append(f"{name}: {v} is no longer listed (withdrawn from the index?)")
    for v in old_covers:
        if v in records_a and v in records_b and records_a[v] != records_b[v]:
            where = ", ".join(moved(records_b[v], records_a[v])[:8])
            lines.append(f"{name}: {v} CHANGED (a release read before): {where}")
    for v in added:
        at = new_covers.index(v)
        previous = new_covers[at - 1] if at else None
        if previous is None or previous not in records_a or v not in records_a:
            lines.append(f"{name}: {v} new")
            continue
        fields = moved(records_a[previous], records_a[v])
        lines.append(f"{name}: {v} new; against {previous}: " + (", ".join(fields) or "no change"))
    return lines


def listed(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """The releases the index's list (profiles/index.json) gained or lost, per package (the
    date it was read is not news)."""
    lines = []
    old, new = before.get("packages", {}), after.get("packages", {})
    for package in sorted(set(old) | set(new)):
        delta = _added_and_gone(old.get(package, []), new.get(package, []))
        if delta:
            lines.append(f"profiles/index.json: {package} {delta}")
    return lines


def _added_and_gone(old: list[str], new: list[str]) -> str:
    """`+0.7.5 +0.7.6 -0.7.3`: the releases added and gone."""
    return " ".join([f"+{v}" for v in new if v not in old] + [f"-{v}" for v in old if v not in new])


def _run(*args: str) -> int:
    """One extractor, from the repository root, its output on stderr; its exit status."""
    command = [sys.executable, *args]
    return subprocess.run(command, cwd=ROOT, stdout=sys.stderr, stderr=sys.stderr).returncode


def refresh(only: list[str]) -> tuple[list[str], bool]:
    """Run the extractors named (all by default) and releases.py; the report and whether an
    extractor failed."""
    lines: list[str] = []
    failed = False
    for script, name in EXTRACTORS.items():
        if only and script not in only:
            continue
        before = _load(name)
        code = _run(str(HERE / f"{script}.py"))
        if code != 0:
            lines.append(f"{name}: {script}.py failed (exit {code}); data left as it was")
            failed = True
            continue
        lines += compare(name, before, _load(name))
    if not only or "index" in only:
        before = json.loads(INDEX.read_text(encoding="utf-8")) if INDEX.is_file() else {}
        code = _run("-m", "tools.extract.index")
        if code != 0:
            lines.append(f"profiles/index.json: index.py failed (exit {code})")
            failed = True
        else:
            lines += listed(before, json.loads(INDEX.read_text(encoding="utf-8")))
    releases = ROOT / "profiles" / "releases.yaml"
    old = releases.read_text(encoding="utf-8") if releases.is_file() else ""
    subprocess.run(
        [sys.executable, str(HERE / "releases.py")], stdout=subprocess.DEVNULL, check=True
    )
    new = releases.read_text(encoding="utf-8")
    if new != old:
        changed = [line for line in new.splitlines() if line not in old.splitlines()]
        lines += [f"profiles/releases.yaml: {line.strip()}" for line in changed]
    engines = [e for e in ("vllm", "sglang") if not only or e in only]
    if engines:
        lines += _flags(engines)
        failed = failed or any(line.endswith("data left as it was") for line in lines)
    return lines, failed


def _flags(engines: list[str]) -> list[str]:
    """tools/extract/flags.py over the engines' covered releases: what it changed."""
    paths = {e: ROOT / "profiles" / "flags" / f"{e}.json" for e in engines}
    before = {e: p.read_text(encoding="utf-8") if p.is_file() else "" for e, p in paths.items()}
    code = _run(str(HERE / "flags.py"), *engines)
    if code != 0:
        return [f"profiles/flags: flags.py failed (exit {code}); data left as it was"]
    out = []
    for engine, path in paths.items():
        if path.read_text(encoding="utf-8") != before[engine]:
            data = json.loads(path.read_text(encoding="utf-8"))
            out.append(
                f"profiles/flags/{engine}.json: rewritten ({len(data['releases'])} releases, "
                f"{len(data['complete'])} read completely)"
            )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", default=[], choices=[*sorted(EXTRACTORS), "index"])
    args = parser.parse_args()
    lines, failed = refresh(args.only)
    print("\n".join(lines) if lines else "nothing moved: no new release, every record the same")
    if lines:
        print(
            "\nnext: python -m pytest tests/test_release_data.py tests/test_release_data_vllm.py "
            "tests/test_moe_release_data.py  (a failure is a profile that disagrees with the data)"
        )
    sys.exit(2 if failed else (1 if lines else 0))


if __name__ == "__main__":
    main()
