"""How much does starting CUDA on N GPUs at once cost on this host, without fp4doctor?

    python benchmarks/parallel_floor.py [--runs N] [--gpus K]

The 2-GPU smoke check starts one worker per GPU at the same time; each imports torch and makes
a CUDA context. This measures that floor alone: K bare `import torch; torch.zeros(1,
device='cuda')` processes started together, one per GPU (CUDA_VISIBLE_DEVICES pinned), against
one; and K plain `import torch` processes (no CUDA) against one, which tells the import (disk
and CPU) apart from the CUDA context creation. Medians over N runs after one warm-up.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

CUDA = "import torch; torch.zeros(1, device='cuda'); torch.cuda.synchronize()"
IMPORT = "import torch"


def together(code: str, gpus: list[str]) -> float:
    """Wall time until all of `len(gpus)` processes, started at once, have finished."""
    start = time.perf_counter()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code], env={**os.environ, "CUDA_VISIBLE_DEVICES": g}
        )
        for g in gpus
    ]
    for p in procs:
        if p.wait() != 0:
            raise SystemExit(f"{code!r} failed with exit {p.returncode}")
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--gpus", type=int, default=2)
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args()
    rows = {}
    for label, code in (("import torch + CUDA init", CUDA), ("import torch only", IMPORT)):
        for k in (1, args.gpus):
            gpus = [str(i) for i in range(k)]
            together(code, gpus)  # warm-up: page cache, driver
            runs = [together(code, gpus) for _ in range(args.runs)]
            rows[f"{label}, {k} at once"] = runs
    print(f"median of {args.runs} runs after one warm-up (load {os.getloadavg()})")
    for name, runs in rows.items():
        print(f"  {name:<40} {statistics.median(runs):6.3f} s  ({min(runs):.3f}-{max(runs):.3f})")
    for label in ("import torch + CUDA init", "import torch only"):
        one = statistics.median(rows[f"{label}, 1 at once"])
        many = statistics.median(rows[f"{label}, {args.gpus} at once"])
        print(f"  {label}: {args.gpus} at once / 1 = {many / one:.2f}x")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"runs": rows, "loadavg": os.getloadavg()}, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
