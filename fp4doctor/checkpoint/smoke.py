"""The live smoke GEMM on the model's own per-rank shapes.

With `--model`, the doctor core asks the smoke workers for each NVFP4 linear layer class's
per-rank (N, K) at a few decode batch sizes and one prefill size, instead of the fixed small
shapes (fp4doctor/smoke/cases.py). The shapes travel to the worker processes in one environment
variable, so neither the runner nor the worker protocol changes; this module is torch-free, for
the parent to write it and the worker to read it.
"""

from __future__ import annotations

from collections.abc import Iterable

SHAPES_ENV = "FP4DOCTOR_SMOKE_SHAPES"
DECODE_M = (1, 16)  # decode: 1 and 16 tokens a step (1 pads the scale rows to 128)
PREFILL_M = 128  # one prefill chunk
MAX_SHAPES = 64


def model_shapes(
    nk: Iterable[tuple[int, int]], decode: Iterable[int] = DECODE_M, prefill: int = PREFILL_M
) -> tuple[tuple[int, int, int], ...]:
    """(M, N, K): the prefill of the first per-rank (N, K) (the first shape is the one timed),
    then the decode sizes of every distinct (N, K). One prefill only: each shape's operands and
    float64 reference are built on the CPU, which dominates a model-sized live check."""
    pairs = list(dict.fromkeys(nk))
    if not pairs:
        return ()
    out = [(prefill, *pairs[0])]
    out += [(m, n, k) for n, k in pairs for m in decode]
    return tuple(out[:MAX_SHAPES])


def encode(shapes: Iterable[tuple[int, int, int]]) -> str:
    return ";".join(f"{m},{n},{k}" for m, n, k in shapes)


def parse(text: str) -> tuple[tuple[int, int, int], ...]:
    """The shapes `encode` wrote; () for an empty or malformed value (the defaults then run)."""
    out = []
    for item in filter(None, text.split(";")):
        parts = item.split(",")
        if len(parts) != 3 or not all(p.strip().isdigit() for p in parts):
            return ()
        m, n, k = (int(p) for p in parts)
        if min(m, n, k) <= 0 or k % 16:
            return ()
        out.append((m, n, k))
    return tuple(out)
