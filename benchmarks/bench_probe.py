"""Time `fp4doctor probe --json` against torch's and FlashInfer's environment collectors.

    python benchmarks/bench_probe.py [--runs N] [--json] [--check]

Each tool runs as a subprocess: one warm-up, then N timed runs. Wall time is measured around the
subprocess; peak memory is the child's maximum resident set as `wait4` reports it (which covers
the child's own children too, such as the probe's cuDNN reader). The table shows medians and how
many times slower each collector is than the probe. A tool that is not installed is reported as
absent; one that fails is reported with its exit status. `--check` exits 1 when the probe misses
its targets (0.25 s, 60 MiB, 8x faster than torch's collect_env, 20x faster than FlashInfer's).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field

TARGET_WALL_S = 0.25
TARGET_PEAK_MIB = 60.0
TARGET_RATIO = {"torch collect_env": 8.0, "flashinfer collect-env": 20.0}
PROBE = "fp4doctor probe"


@dataclass
class Result:
    tool: str
    command: list[str] | None
    status: str = "ok"  # ok | absent | failed
    detail: str | None = None
    walls_s: list[float] = field(default_factory=list)
    peaks_mib: list[float] = field(default_factory=list)

    @property
    def wall_s(self) -> float | None:
        return statistics.median(self.walls_s) if self.walls_s else None

    @property
    def peak_mib(self) -> float | None:
        return statistics.median(self.peaks_mib) if self.peaks_mib else None


def script(name: str) -> str | None:
    """A console script installed next to this interpreter, else on PATH."""
    beside = os.path.join(os.path.dirname(sys.executable), name)
    if os.path.isfile(beside) and os.access(beside, os.X_OK):
        return beside
    return shutil.which(name)


def commands() -> list[tuple[str, list[str] | None, str | None]]:
    """(tool, command or None, why absent)."""
    fp4doctor = script("fp4doctor")
    probe = (
        [fp4doctor, "probe", "--json"]
        if fp4doctor
        else [sys.executable, "-m", "fp4doctor", "probe", "--json"]
    )
    torch = (
        [sys.executable, "-m", "torch.utils.collect_env"]
        if importlib.util.find_spec("torch") is not None
        else None
    )
    flashinfer = script("flashinfer")
    return [
        (PROBE, probe, None),
        ("torch collect_env", torch, "torch is not installed"),
        (
            "flashinfer collect-env",
            [flashinfer, "collect-env", "--json"] if flashinfer else None,
            "the flashinfer command is not installed",
        ),
    ]


def run_once(command: list[str]) -> tuple[float, float, int]:
    """(wall seconds, peak MiB, exit status) of one run."""
    start = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    return wall, usage.ru_maxrss / 1024.0, child.returncode  # Linux reports KiB


def measure(tool: str, command: list[str] | None, why_absent: str | None, runs: int) -> Result:
    result = Result(tool, command)
    if command is None:
        result.status, result.detail = "absent", why_absent
        return result
    print(f"{tool}: warm-up, then {runs} runs", file=sys.stderr)
    for attempt in range(runs + 1):
        wall, peak, code = run_once(command)
        if code != 0:
            result.status, result.detail = "failed", f"exit {code}"
            return result
        if attempt > 0:  # the first run warms the page cache
            result.walls_s.append(wall)
            result.peaks_mib.append(peak)
    return result


def ratios(results: list[Result]) -> dict[str, float]:
    base = next(r for r in results if r.tool == PROBE).wall_s
    return {
        r.tool: r.wall_s / base
        for r in results
        if r.tool != PROBE and r.wall_s is not None and base
    }


def verdicts(results: list[Result]) -> dict[str, bool]:
    probe = next(r for r in results if r.tool == PROBE)
    found = {
        f"probe wall <= {TARGET_WALL_S} s": probe.wall_s is not None
        and probe.wall_s <= TARGET_WALL_S,
        f"probe peak <= {TARGET_PEAK_MIB:g} MiB": probe.peak_mib is not None
        and probe.peak_mib <= TARGET_PEAK_MIB,
    }
    for tool, ratio in ratios(results).items():
        found[f"{ratio:.1f}x faster than {tool} (target {TARGET_RATIO[tool]:g}x)"] = (
            ratio >= TARGET_RATIO[tool]
        )
    return found


def table(results: list[Result], runs: int) -> str:
    lines = [
        f"median of {runs} runs after one warm-up, {os.cpu_count()} CPUs",
        f"{'tool':<24} {'wall':>9} {'range':>15} {'peak':>10} {'vs probe':>9}",
    ]
    relative = ratios(results)
    for r in results:
        if r.status != "ok":
            lines.append(f"{r.tool:<24} {r.status}: {r.detail}")
            continue
        spread = f"{min(r.walls_s):.3f}-{max(r.walls_s):.3f}"
        ratio = f"{relative[r.tool]:.1f}x" if r.tool in relative else "1.0x"
        lines.append(
            f"{r.tool:<24} {r.wall_s:>8.3f}s {spread:>15} {r.peak_mib:>6.1f} MiB {ratio:>9}"
        )
    lines.append("")
    for name, ok in verdicts(results).items():
        lines.append(f"{'PASS' if ok else 'MISS'}  {name}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="timed runs per tool (default 5)")
    parser.add_argument("--json", action="store_true", help="print a JSON document instead")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")

    results = [measure(tool, cmd, why, args.runs) for tool, cmd, why in commands()]
    checks = verdicts(results)
    if args.json:
        document = {
            "runs": args.runs,
            "cpus": os.cpu_count(),
            "results": [
                {**asdict(r), "wall_s_median": r.wall_s, "peak_mib_median": r.peak_mib}
                for r in results
            ],
            "ratios": ratios(results),
            "targets": checks,
        }
        print(json.dumps(document, indent=2))
    else:
        print(table(results, args.runs))
    return 1 if args.check and not all(checks.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
