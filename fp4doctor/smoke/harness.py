"""Run one adapter in the worker: build each problem, call, check, time; return a result dict.

Everything that can go wrong inside Python becomes a value here: `Unavailable` is `skip`,
`Refused` and any other library exception are `fail` with the library's words, a wrong
answer is `fail` with the numbers, an out-of-memory is `error` (no verdict). Crashes and
hangs cannot be caught in-process; the parent turns those into `error`.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from fp4doctor.smoke.adapters import Adapter, Refused, Unavailable
from fp4doctor.smoke.cases import SHAPES, make_case
from fp4doctor.smoke.check import Verdict, check_output
from fp4doctor.smoke.errors import summarize

WARMUP_CALLS = 3
TIMED_CALLS = 20
# How allocators word a failed allocation (CUDA's caching allocator, torch's CPU allocator).
_OOM_MARKERS = ("out of memory", "can't allocate memory", "cannot allocate memory")


@dataclass
class Outcome:
    """A result as the worker sends it (the parent adds device and GPU)."""

    status: str
    reason: str
    max_abs_err: float | None = None
    tolerance: float | None = None
    norm_ratio: float | None = None
    unwritten: int | None = None
    median_ms: float | None = None
    shapes: list[list[int]] | None = None
    library_error: str | None = None
    context_lost: bool = False  # the CUDA context is unusable: the worker must be replaced

    def fields(self) -> dict[str, object]:
        data = dict(vars(self))
        data.pop("context_lost")
        return data


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _context_lost(device: str) -> bool:
    """After a CUDA error: is the context still usable? (Errors like an illegal address are
    sticky; every later call in this process would fail too.)"""
    if not device.startswith("cuda"):
        return False
    try:
        torch.cuda.synchronize()
        torch.zeros(1, device=device).add_(1).item()
    except Exception:
        return True
    return False


def median_ms(call: Callable[[], object], device: str) -> float:
    """Median milliseconds of `call` over `TIMED_CALLS` calls after `WARMUP_CALLS` warm-ups;
    CUDA events on a GPU, `time.perf_counter` on the CPU."""
    for _ in range(WARMUP_CALLS):
        call()
    _sync(device)
    times: list[float] = []
    if device.startswith("cuda"):
        pairs = []
        for _ in range(TIMED_CALLS):
            start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
            end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
            start.record()
            call()
            end.record()
            pairs.append((start, end))
        torch.cuda.synchronize()
        times = [float(s.elapsed_time(e)) for s, e in pairs]
    else:
        for _ in range(TIMED_CALLS):
            t0 = time.perf_counter()
            call()
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def _library_failure(exc: Exception) -> tuple[str, str | None]:
    """(reason, library_error) for an exception from an adapter: the library's own words."""
    if isinstance(exc, Refused):
        return exc.reason, exc.library_error
    return summarize(exc)


def _out_of_memory(exc: Exception) -> bool:
    """A failed allocation says nothing about the kernel: no verdict (`error`), not `fail`."""
    if isinstance(exc, (MemoryError, torch.cuda.OutOfMemoryError)):
        return True
    text = str(exc).lower()
    return any(marker in text for marker in _OOM_MARKERS)


def _shape_text(shape: Sequence[int]) -> str:
    m, n, k = shape
    return f"m={m} n={n} k={k}"


def run_adapter(
    adapter: Adapter, device: str, shapes: Sequence[tuple[int, int, int]] = SHAPES
) -> Outcome:
    """Run `adapter`'s GEMM on `device` ("cpu" or "cuda") for each shape and judge it."""
    try:
        label = adapter.load()
    except Unavailable as exc:
        return Outcome("skip", exc.reason, library_error=exc.library_error)
    except Exception as exc:
        reason, text = _library_failure(exc)
        if not isinstance(exc, Refused):
            reason = f"import failed: {reason}"
        return Outcome("fail", reason, library_error=text)
    if device == "cpu" and not adapter.supports_cpu:
        return Outcome("skip", f"needs a CUDA GPU ({label} imported fine)")

    ran: list[list[int]] = []
    verdicts: list[tuple[list[int], Verdict]] = []
    timed: float | None = None
    for m, n, k in shapes:
        shape = [m, n, k]
        case = make_case(m, n, k, device)
        out = case.new_output(device)
        ran.append(shape)
        try:
            call = adapter.bind(case, out)
            call()
            _sync(device)
        except Unavailable as exc:
            return Outcome("skip", exc.reason, shapes=ran, library_error=exc.library_error)
        except Exception as exc:
            reason, text = _library_failure(exc)
            status = "fail"
            if _out_of_memory(exc):
                status, reason = "error", f"out of memory, no verdict on the kernel: {reason}"
            lost = _context_lost(device)
            if lost:
                reason += " (the CUDA context is lost; the worker is replaced)"
            return Outcome(status, reason, shapes=ran, library_error=text, context_lost=lost)
        verdict = check_output(out, case.ref)
        verdicts.append((shape, verdict))
        if not verdict.passed:
            return Outcome(
                "fail",
                f"{_shape_text(shape)}: {verdict.reason}",
                verdict.max_abs_err,
                verdict.tolerance,
                verdict.norm_ratio,
                verdict.unwritten,
                shapes=ran,
            )
        if timed is None:
            try:
                timed = median_ms(call, device)
            except Exception as exc:
                reason, text = _library_failure(exc)
                return Outcome(
                    "fail",
                    f"{_shape_text(shape)}: the first call was right, a repeated call raised: "
                    f"{reason}",
                    shapes=ran,
                    library_error=text,
                    context_lost=_context_lost(device),
                )
            again = check_output(out, case.ref)  # out now holds the last timed call's answer
            if not again.passed:
                return Outcome(
                    "fail",
                    f"{_shape_text(shape)}: the first call was right, repeated calls not: "
                    f"{again.reason}",
                    again.max_abs_err,
                    again.tolerance,
                    again.norm_ratio,
                    again.unwritten,
                    shapes=ran,
                )

    worst_shape, worst = max(verdicts, key=lambda sv: sv[1].badness)
    ratios = [v.norm_ratio for _, v in verdicts if v.norm_ratio is not None]
    far = max(ratios, key=lambda r: abs(r - 1.0)) if ratios else None
    reason = (
        f"{len(verdicts)} shapes match the reference; "
        f"closest to the limit at {_shape_text(worst_shape)}: {worst.reason}"
    )
    if timed is not None:
        reason += f"; median {timed:.3g} ms at {_shape_text(shapes[0])}"
    return Outcome(
        "pass",
        f"{reason} ({label})",
        worst.max_abs_err,
        worst.tolerance,
        far,
        0,
        timed,
        shapes=ran,
    )
