"""When does each smoke worker reach each step, when one or several run at once?

    python benchmarks/smoke_timeline.py [--gpus K] [ADAPTER ...]

Starts K smoke workers together (one per GPU, CUDA_VISIBLE_DEVICES pinned, as the doctor
does) and prints, per worker, the seconds from start to each protocol event (hello = torch
imported and CUDA up; start/result per adapter; exit). Then does the same with one worker.
A diagnostic for the 2-GPU smoke time (docs/performance.md).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time


def follow(gpu: int, adapters: list[str], t0: float, out: dict[int, list[str]]) -> None:
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": str(gpu), "FLASHINFER_DISABLE_JIT": "1"}
    cmd = [sys.executable, "-m", "fp4doctor.smoke.worker", "--device", "cuda", *adapters]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    steps = []
    assert proc.stdout is not None
    for line in proc.stdout:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        label = msg.get("event", "?") + (f":{msg['adapter']}" if "adapter" in msg else "")
        steps.append(f"{label}@{time.perf_counter() - t0:.2f}")
    proc.wait()
    steps.append(f"exit@{time.perf_counter() - t0:.2f}")
    out[gpu] = steps


def once(gpus: list[int], adapters: list[str]) -> None:
    out: dict[int, list[str]] = {}
    t0 = time.perf_counter()
    threads = [threading.Thread(target=follow, args=(g, adapters, t0, out)) for g in gpus]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for g in gpus:
        print(f"  {len(gpus)} at once, GPU {g}: {'  '.join(out[g])}")


def main() -> int:
    args = sys.argv[1:]
    k = 2
    if args[:1] == ["--gpus"]:
        k, args = int(args[1]), args[2:]
    adapters = args or ["emulation"]
    for gpus in ([0], list(range(k)), [0], list(range(k))):
        once(gpus, adapters)
    return 0


if __name__ == "__main__":
    sys.exit(main())
