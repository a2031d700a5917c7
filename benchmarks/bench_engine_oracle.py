"""`fp4doctor check` asking the installed vLLM (or SGLang), beside `python -c "import vllm"`
(`import sglang`), on this host.

    python benchmarks/bench_engine_oracle.py [--engine vllm|sglang] [--venv DIR] [--runs N]

All under the venv's interpreter (a real `pip install vllm==V`), round-robin in one run
(timing.measure_interleaved), medians:
- `import vllm`: the baseline (issue 26: check with vLLM installed costs at most 1.3x it);
- `check`, answers kept: the usual run; the engine's answers come from fp4doctor's cache,
  which any reinstall of vLLM, torch or FlashInfer invalidates (oracle/query.py);
- `check`, cache off: the oracle worker imports vLLM's selection code and asks it every run
  (the first run after an install);
- `check --no-engine`: the rules alone.
On a host without a GPU `check` asks nothing (the engine stops before choosing), so the check
judges a B200 snapshot of the venv's own install (its probe with one B200 GPU: `--facts` asks
only the engine the snapshot holds, fp4doctor/oracle/sameness.py) at the installed version
(`--facts`, `--engine-version`): the engine is
asked for compute capability 10.0 through the capability stub, and its compiled extension loads
against the stub libcuda.so.1 of tools/engine_agreement.py (a FAKE driver: a CPU host has none).

The venv's bytecode is compiled first, as `pip install` leaves it (compileall under the venv's
interpreter; a no-op once done): a venv made by uv without --compile-bytecode, on a host that
sets PYTHONDONTWRITEBYTECODE, compiles vLLM's and torch's sources on every import, and that
measured 14.6 s of a 30 s oracle worker (cProfile, vLLM 0.34.0) against far less for the
smaller `import vllm`: the ratio would time the compiler.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from timing import Spec, measure_interleaved, ratio, table, verdict_lines

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fp4doctor import facts  # noqa: E402
from tools.engine_agreement import RELEASES, host_for, probed, stub_driver  # noqa: E402

TARGET_RATIO = 1.3
CACHED = "fp4doctor check (answers kept)"
NEWEST = {engine: f"{engine}-{v}" for engine, v in RELEASES}  # the default venv: the last asked


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", choices=sorted(NEWEST), default="vllm")
    parser.add_argument("--venv", type=Path, help="default: $FP4DOCTOR_ENGINE_VENVS/<newest>")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--warmups", type=int, default=1)
    args = parser.parse_args()
    engine = args.engine
    venvs = Path(os.environ.get("FP4DOCTOR_ENGINE_VENVS", "/work/venvs"))
    python = (args.venv or venvs / NEWEST[engine]) / "bin" / "python"
    if not python.exists():
        print(f"{python}: no {engine} venv there (--venv)", file=sys.stderr)
        return 2
    baseline = f'python -c "import {engine}"'
    metadata = f"from importlib.metadata import version; print(version({engine!r}))"
    version = subprocess.run(
        [str(python), "-c", metadata],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # Errors are the test files written for newer Pythons (torch's py312_intrinsics.py): left.
    subprocess.run([str(python), "-m", "compileall", "-q", "-j", "0", site], capture_output=True)
    with tempfile.TemporaryDirectory() as tmp:
        driver = stub_driver(Path(tmp))
        cache = Path(tmp) / "cache"
        # The venv's own probe with one B200: a snapshot whose engine is the one installed
        # (check --facts asks only that one: fp4doctor/oracle/sameness.py).
        snapshot = Path(tmp) / "b200.json"
        snapshot.write_text(facts.dumps(host_for(probed(python, engine), (10, 0), True)))
        base = {"PYTHONPATH": str(ROOT), "LD_LIBRARY_PATH": str(driver)}  # over this environment
        check = [
            str(python),
            "-m",
            "fp4doctor",
            "check",
            "--target",
            engine,
            "--facts",
            str(snapshot),
            "--engine-version",
            version,
        ]
        specs = [
            Spec(baseline, [str(python), "-c", f"import {engine}"], env=base),
            Spec(CACHED, check, ok_codes=(0, 1), env={**base, "FP4DOCTOR_CACHE_DIR": str(cache)}),
            Spec(
                "fp4doctor check (cache off)",
                check,
                ok_codes=(0, 1),
                env={**base, "FP4DOCTOR_CACHE_DIR": ""},
            ),
            Spec(
                "fp4doctor check --no-engine",
                [*check, "--no-engine"],
                ok_codes=(0, 1),
                env={**base, "FP4DOCTOR_CACHE_DIR": str(cache)},
            ),
        ]
        results = measure_interleaved(specs, args.runs, warmups=args.warmups)
    by_tool = {r.tool: r for r in results}
    ratios = {r.tool: q for r in results if (q := ratio(r, by_tool[baseline])) is not None}
    title = (
        f"{engine} {version} ({python}), {args.runs} runs each, round-robin; ratio to {baseline}"
    )
    for line in table(results, title=title, ratio_label="ratio", ratios=ratios):
        print(line)
    cached = ratios.get(CACHED)
    print()
    for line in verdict_lines(
        {
            f"{CACHED} <= {TARGET_RATIO}x import {engine}": None
            if cached is None
            else cached <= TARGET_RATIO
        }
    ):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
