"""What reading the checkpoint's content costs `check --model`: bytes read and wall time, before
and after (issue 40, item 3), on checkpoints with many experts.

Two checkpoints, written to a temporary directory:
- `headers`: Qwen3-30B-A3B-shaped, all 48 layers and all 128 experts, 16 shards with an index,
  header-only (tests/checkpoints/make.py; ~75,000 tensor entries, no tensor data);
- `data`: the same layout (48 layers x 128 experts, 16 shards) with its tensor data, at small
  sizes (hidden 64, MoE intermediate 32; tests/safetensors_writer.py), so that every scalar scale
  is read.

For each, and for each fp4doctor (`--before DIR`: a checkout of the code before, e.g. main;
the code beside this file after): the bytes `checkpoint.load` reads (the `rchar` of
/proc/self/io around the call, in a fresh process, after its imports) and the wall time of
`fp4doctor check --facts B200 --target vllm --no-smoke --model DIR` (benchmarks/timing.py:
interleaved subprocesses, medians).

    python benchmarks/bench_content.py --before /work/main [--runs 5] [--json results/content.json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import timing

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "checkpoints"))
sys.path.insert(0, str(ROOT / "tests"))
import make  # noqa: E402  (the fixture generator)
import safetensors_writer  # noqa: E402  (small real checkpoints)

FACTS = ROOT / "tests" / "fixtures" / "hosts" / "b200.json"
LAYERS, EXPERTS, SHARDS = 48, 128, 16
READ = """
import sys
from fp4doctor import checkpoint
def rchar():
    with open('/proc/self/io') as f:
        return int(next(l for l in f if l.startswith('rchar:')).split()[1])
checkpoint.load(sys.argv[1]); before = rchar(); checkpoint.load(sys.argv[1]); after = rchar()
print(after - before)
"""


def headers_only(root: Path) -> int:
    qwen = next(m for m in make.MODELS if m.name == "qwen3-30b-a3b-fp4")
    full = dataclasses.replace(
        qwen, layers=tuple(range(LAYERS)), stored_experts=EXPERTS, shards=SHARDS
    )
    root.mkdir()
    for name, data in make.files(full).items():
        (root / name).write_bytes(data)
    return len(make.tensors(full))


def with_data(root: Path) -> int:
    layout = safetensors_writer.moe_checkpoint(
        layers=LAYERS, experts=EXPERTS, shards=SHARDS, hidden=64, inter=32
    )
    layout.write(root)
    return sum(len(s) for s in layout.shards)


def bytes_read(model: Path, code: Path) -> int:
    env = {**os.environ, "PYTHONPATH": str(code)}
    done = subprocess.run([sys.executable, "-c", READ, str(model)], env=env, check=True,
                          capture_output=True, text=True)  # fmt: skip
    return int(done.stdout.split()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="a checkout of the old code")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args()
    codes = {"before": args.before.resolve(), "after": ROOT}
    out: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as tmp:
        models = {}
        for name, write in (("headers", headers_only), ("data", with_data)):
            path = Path(tmp) / name
            count = write(path)
            size = sum(f.stat().st_size for f in path.iterdir())
            models[name] = path
            print(f"{name}: {LAYERS} layers x {EXPERTS} experts, {SHARDS} shards, {count} "
                  f"tensors, {size} bytes on disk", file=sys.stderr)  # fmt: skip
            out[name] = {"tensors": count, "bytes_on_disk": size}
        specs = []
        for name, model in models.items():
            for when, code in codes.items():
                read = bytes_read(model, code)
                out[f"{name}.{when}.bytes_read"] = read
                print(f"{name} {when}: checkpoint.load reads {read} bytes", file=sys.stderr)
                command = [sys.executable, "-m", "fp4doctor", "check", "--facts", str(FACTS),
                           "--target", "vllm", "--no-smoke", "--model", str(model)]  # fmt: skip
                env = {"PYTHONPATH": str(code), "PATH": os.environ.get("PATH", ""),
                       "HOME": os.environ.get("HOME", "/")}  # fmt: skip
                specs.append(timing.Spec(f"{name} {when}", command, None, (0, 1), env, None))
        results = timing.measure_interleaved(specs, args.runs)
    lines = timing.table(results, title="check --model, before and after the content read",
                         ratio_label=None, ratios={})  # fmt: skip
    print("\n".join(lines))
    for name in models:
        print(f"{name}: bytes read {out[f'{name}.before.bytes_read']} before, "
              f"{out[f'{name}.after.bytes_read']} after")  # fmt: skip
    if args.json:
        out["results"] = [r.to_json() for r in results]
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
