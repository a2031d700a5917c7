"""Two trees of fp4doctor side by side: the same commands, round-robin, on one machine.

    python benchmarks/side_by_side.py --before 343ccff [--runs 15] [--live [--live-runs 9]]
    python benchmarks/side_by_side.py --before DIR ...   # a tree exported beforehand

On a machine whose speed drifts from run to run (the device machines: a bare interpreter start
of 58-100 ms within one run), absolute figures from different runs cannot show what a change
did; the same commands from the old tree and from this checkout, interleaved, can. The old
tree's `fp4doctor/` and `profiles/` are exported from git (`git archive REV`) into a temporary
directory, or read from a directory that holds them (for a copy of the checkout without its git
history, as on the device machines: `git archive REV fp4doctor profiles | tar x -C DIR` here,
and DIR carried there). The bytecode of both trees and of their dependencies is compiled first,
as after a pip install (`timing.compile_bytecode`). Each command runs as `python -P -m
fp4doctor ...` with its tree first on PYTHONPATH (`-P`: not the current directory), one
warm-up, then the runs round-robin (timing.measure_interleaved):

- beside `python -c pass`: `check --no-smoke --target vllm`, `env --target vllm` and `probe
  --json`;
- with `--live` (a host with an NVIDIA GPU and torch; `CUDA_VISIBLE_DEVICES=0`), in a round of
  their own (`--live-runs`: each run costs seconds), beside the CUDA floor `python -c "import
  torch; torch.zeros(1, device='cuda')"`: `check --smoke --json --target vllm` and `check
  --smoke --force --json --target flashinfer`, each with its ratio to the floor.

Prints medians, after/before ratios and, for the live rows, the ratio to the floor; `--json`
keeps every run. Exit codes 0 and 1 of fp4doctor (ready, not ready) are both results.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from timing import Result, Spec, compile_bytecode, measure_interleaved, table

REPO = Path(__file__).resolve().parents[1]
STATIC = (
    ("check --no-smoke", ["check", "--no-smoke", "--target", "vllm"]),
    ("env", ["env", "--target", "vllm"]),
    ("probe --json", ["probe", "--json"]),
)
LIVE = (
    ("check --smoke", ["check", "--smoke", "--json", "--target", "vllm"]),
    (
        "flashinfer --force",
        ["check", "--smoke", "--force", "--json", "--target", "flashinfer"],
    ),
)
FLOOR = "floor: torch cuda init"
ONE_GPU = {"CUDA_VISIBLE_DEVICES": "0"}


def export(rev: str, into: Path) -> Path:
    """`fp4doctor/` and `profiles/` of `rev`, written under `into`, or `rev` itself where it is
    a directory holding them; raises SystemExit for a revision git does not know."""
    if (Path(rev) / "fp4doctor" / "__init__.py").is_file():
        return Path(rev).resolve()
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", rev, "fp4doctor", "profiles"],
        capture_output=True,
        check=False,
    )
    if archive.returncode != 0:
        raise SystemExit(f"side_by_side: git archive {rev}: {archive.stderr.decode().strip()}")
    subprocess.run(["tar", "x", "-C", str(into)], input=archive.stdout, check=True)
    return into


def specs(trees: dict[str, Path], live: bool) -> list[Spec]:
    """A baseline (`python -c pass`, or the CUDA floor for the live rows), then each command
    from each tree (before, now)."""
    if live:
        floor = "import torch; torch.zeros(1, device='cuda')"
        found = [Spec(FLOOR, [sys.executable, "-c", floor], env=ONE_GPU)]
    else:
        found = [Spec("python -c pass", [sys.executable, "-c", "pass"])]
    for label, arguments in LIVE if live else STATIC:
        for tree, root in trees.items():
            path = os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH")) if p)
            env = {"PYTHONPATH": path, **(ONE_GPU if live else {})}
            command = [sys.executable, "-P", "-m", "fp4doctor", *arguments]
            found.append(Spec(f"{tree}: {label}", command, ok_codes=(0, 1), env=env))
    return found


def ratios(results: list[Result], live: bool) -> list[str]:
    by_tool = {r.tool: r for r in results}
    floor = by_tool.get(FLOOR)
    lines = ["", "ratios of median wall times"]
    for label, _arguments in LIVE if live else STATIC:
        before, now = by_tool[f"before: {label}"], by_tool[f"now: {label}"]
        if before.wall_s and now.wall_s:
            lines.append(f"  {label:<22} now / before {now.wall_s / before.wall_s:.2f}x")
        if live and floor is not None and floor.wall_s:
            for result in (before, now):
                if result.wall_s:
                    shown = f"{result.wall_s / floor.wall_s:.2f}x the floor"
                    lines.append(f"  {result.tool:<32} {shown}")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--before",
        required=True,
        metavar="REV|DIR",
        help="the old tree: a revision, or a directory holding its fp4doctor/ and profiles/",
    )
    parser.add_argument("--runs", type=int, default=15, help="timed runs per command")
    parser.add_argument("--live", action="store_true", help="also the live GEMM checks")
    parser.add_argument("--live-runs", type=int, help="timed runs per live command (--runs)")
    parser.add_argument("--json", metavar="PATH", help="write every run to PATH")
    options = parser.parse_args()
    groups = [(False, options.runs)]
    if options.live:
        groups.append((True, options.live_runs or options.runs))
    lines: list[str] = []
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="fp4doctor-before-") as scratch:
        trees = {"before": export(options.before, Path(scratch)), "now": REPO}
        compile_bytecode([root / "fp4doctor" for root in trees.values()], live=options.live)
        for live, runs in groups:
            measured = measure_interleaved(specs(trees, live), runs)
            title = f"median of {runs} runs after one warm-up, round-robin"
            lines += table(measured, title=title, ratio_label=None, ratios={}, show_env=True)
            lines += [*ratios(measured, live), ""]
            results += measured
    print("\n".join(lines).rstrip())
    if options.json:
        document = {"before": options.before, "results": [r.to_json() for r in results]}
        Path(options.json).write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
