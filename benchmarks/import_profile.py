"""What a command's imports cost, module by module: the median of `-X importtime` over runs.

    python benchmarks/import_profile.py --runs 15 --top 40 -- -m fp4doctor check --no-smoke

One `-X importtime` run is noisy (a page fault or another process lands on one module); the
median of each module's self and cumulative time over several runs is not. Also prints the
median wall time of the whole command and of `python -c pass` beside it, and how long the
dataclasses the imports build take (`--dataclasses`). The bytecode of fp4doctor and of what it
imports is compiled first, as after a pip install (`timing.compile_bytecode`).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from collections import defaultdict

from timing import compile_bytecode, measure

_DATACLASS_TIMER = """
import dataclasses, runpy, sys, time
_build, _spent = dataclasses._process_class, []
def _timed(cls, *args, **kwargs):
    start = time.perf_counter()
    try:
        return _build(cls, *args, **kwargs)
    finally:
        _spent.append(time.perf_counter() - start)
dataclasses._process_class = _timed
sys.argv = [{module!r}, *{args!r}]
try:
    runpy.run_module({module!r}, run_name="__main__", alter_sys=True)
except SystemExit:
    pass
finally:
    sys.stderr.write(f"DATACLASSES {{len(_spent)}} {{sum(_spent) * 1000:.2f}}\\n")
"""


def _importtime(command: list[str]) -> list[tuple[str, int, int]]:
    run = subprocess.run(
        [sys.executable, "-X", "importtime", *command], capture_output=True, text=True, check=False
    )
    rows = []
    for line in run.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        own, cumulative, name = line.removeprefix("import time:").split("|")
        rows.append((name.strip(), int(own), int(cumulative)))
    return rows


def _wall(command: list[str], runs: int) -> str:
    """The median wall time of `command` (timing.measure; exit 1, not ready, is a result)."""
    result = measure(" ".join(command), command, None, runs, ok_codes=(0, 1), log=None)
    return f"{result.wall_s * 1000:.1f} ms" if result.wall_s is not None else str(result.detail)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--dataclasses", action="store_true", help="time the dataclasses built")
    parser.add_argument(
        "command", nargs="+", help="the interpreter's arguments, e.g. -m fp4doctor env"
    )
    options = parser.parse_args()
    compile_bytecode()

    own: defaultdict[str, list[int]] = defaultdict(list)
    cumulative: defaultdict[str, list[int]] = defaultdict(list)
    for _ in range(options.runs):
        for name, self_us, cumulative_us in _importtime(options.command):
            own[name].append(self_us)
            cumulative[name].append(cumulative_us)
    medians = sorted(
        ((statistics.median(v), statistics.median(cumulative[k]), k) for k, v in own.items()),
        reverse=True,
    )
    total_ms = sum(m[0] for m in medians) / 1000
    print(f"{len(medians)} modules, {total_ms:.1f} ms of imports (median self, summed)")
    print(f"{'self ms':>8} {'cum ms':>8}  module")
    for median_self, median_cumulative, name in medians[: options.top]:
        print(f"{median_self / 1000:8.2f} {median_cumulative / 1000:8.2f}  {name}")
    floor = _wall([sys.executable, "-c", "pass"], options.runs)
    command = _wall([sys.executable, *options.command], options.runs)
    print(f"wall (medians): python -c pass {floor}, the command {command}")
    if options.dataclasses and options.command[0] == "-m":
        script = _DATACLASS_TIMER.format(module=options.command[1], args=options.command[2:])
        spent = []
        for _ in range(options.runs):
            run = subprocess.run(
                [sys.executable, "-c", script], capture_output=True, text=True, check=False
            )
            line = next(x for x in run.stderr.splitlines() if x.startswith("DATACLASSES "))
            count, ms = line.split()[1:]
            spent.append(float(ms))
        print(f"dataclasses: {count} built, {statistics.median(spent):.1f} ms (median)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
