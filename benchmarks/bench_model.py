"""`check --model` on a 160-shard checkpoint: at most 1 s more than the same check without it.

Generates a header-only DeepSeek-R1-shaped checkpoint (tests/checkpoints/make.py: all 61 layers,
all 256 experts, 160 shards with an index; ~190,000 tensor entries, no tensor data), then times
`fp4doctor check --facts B200 --target vllm --no-smoke` with and without `--model DIR --tp 8`,
interleaved (benchmarks/timing.py: each a subprocess, medians of the timed runs).

    python benchmarks/bench_model.py [--runs 7] [--json results/model.json]

Exit status 1 when the target (median difference <= 1 s) is missed.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
from pathlib import Path

import timing

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "checkpoints"))
import make  # noqa: E402  (the fixture generator)

FACTS = ROOT / "tests" / "fixtures" / "hosts" / "b200.json"
SHARDS = 160
TARGET_S = 1.0


def write_checkpoint(root: Path) -> int:
    """A full-size DeepSeek-R1 FP4 checkpoint's configs and headers; its tensor count."""
    ds = next(m for m in make.MODELS if m.name == "deepseek-r1-fp4")
    full = dataclasses.replace(
        ds,
        layers=tuple(range(ds.config["num_hidden_layers"])),
        stored_experts=ds.config["n_routed_experts"],
        shards=SHARDS,
    )
    for name, data in make.files(full).items():
        (root / name).write_bytes(data)
    return len(make.tensors(full))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args()
    fp4doctor = [sys.executable, "-m", "fp4doctor"]
    base = [*fp4doctor, "check", "--facts", str(FACTS), "--target", "vllm", "--no-smoke"]
    with tempfile.TemporaryDirectory() as tmp:
        tensors = write_checkpoint(Path(tmp))
        print(f"checkpoint: {SHARDS} shards, {tensors} tensors (headers only)", file=sys.stderr)
        specs = [
            timing.Spec("check", base, None, (0, 1), None, None),
            timing.Spec(
                "check --model (160 shards)",
                [*base, "--model", tmp, "--tp", "8"],
                None,
                (0, 1),
                None,
                None,
            ),
        ]
        without, with_model = timing.measure_interleaved(specs, args.runs)
    lines = timing.table([without, with_model], title="check, with and without --model",
                         ratio_label=None, ratios={})  # fmt: skip
    print("\n".join(lines))
    ok = None
    if without.wall_s is not None and with_model.wall_s is not None:
        extra = with_model.wall_s - without.wall_s
        ok = extra <= TARGET_S
        print(f"--model adds {extra:.3f} s (median wall; target <= {TARGET_S} s)")
    print("\n".join(timing.verdict_lines({"160-shard --model within 1 s": ok})))
    if args.json:
        args.json.write_text(
            json.dumps({"shards": SHARDS, "tensors": tensors,
                        "results": [without.to_json(), with_model.to_json()]}, indent=2) + "\n"
        )  # fmt: skip
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
