"""Run one adapter in the worker: build each problem, call, check, time; return its result.

Everything that can go wrong inside Python becomes a value here: `Unavailable` is `skip`,
`Refused` and any other library exception are `fail` with the library's words, a wrong
answer is `fail` with the numbers, an out-of-memory is `error` (no verdict). Crashes and
hangs cannot be caught in-process; the parent turns those into `error`.
"""

from __future__ import annotations

import functools
import statistics
import time
from collections.abc import Callable, Sequence

import torch

from fp4doctor.findings import Status
from fp4doctor.smoke.adapters import Adapter, Refused, Unavailable
from fp4doctor.smoke.cases import SHAPES, make_case
from fp4doctor.smoke.check import Comparison, check_output
from fp4doctor.smoke.errors import summarize
from fp4doctor.smoke.result import SmokeResult

WARMUP_CALLS = 3
TIMED_CALLS = 20  # at most; a slow call (an emulation, ~4 ms) is timed fewer times:
MIN_TIMED_CALLS = 5
TIMING_BUDGET_S = 0.02  # ... as many as fit in this, judged by one call after the warm-ups
# How allocators word a failed allocation (CUDA's caching allocator, torch's CPU allocator).
_OOM_MARKERS = ("out of memory", "can't allocate memory", "cannot allocate memory")


class ContextLost(Exception):
    """The adapter left the CUDA context unusable: `result` is its last word, and the worker
    must be replaced before another adapter runs."""

    def __init__(self, result: SmokeResult) -> None:
        super().__init__(result.reason)
        self.result = result


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
    """Median milliseconds of `call` after `WARMUP_CALLS` warm-ups, over `TIMED_CALLS` calls,
    or as many (`MIN_TIMED_CALLS` at least) as fit in `TIMING_BUDGET_S`; CUDA events on a GPU,
    `time.perf_counter` on the CPU."""
    for _ in range(WARMUP_CALLS):
        call()
    _sync(device)
    t0 = time.perf_counter()
    call()
    _sync(device)
    one = time.perf_counter() - t0
    calls = max(MIN_TIMED_CALLS, min(TIMED_CALLS, int(TIMING_BUDGET_S / max(one, 1e-9))))
    times: list[float] = []
    if device.startswith("cuda"):
        pairs = []
        for _ in range(calls):
            start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
            end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
            start.record()
            call()
            end.record()
            pairs.append((start, end))
        torch.cuda.synchronize()
        times = [float(s.elapsed_time(e)) for s, e in pairs]
    else:
        for _ in range(calls):
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
    adapter: Adapter,
    device: str,
    shapes: Sequence[tuple[int, int, int]] = SHAPES,
    on_loaded: Callable[[], None] | None = None,
) -> SmokeResult:
    """Run `adapter`'s GEMM on `device` ("cpu" or "cuda") for each shape and judge it.
    `on_loaded` is called once the library is imported, before the first GEMM: the worker
    tells the parent, whose timeout for the GEMMs starts there (an import is start-up).

    The result names `device` as the worker sees it and no GPU: the parent, which knows the
    GPU, fills both in. Raises `ContextLost`, carrying the result, when a call that raised left
    the CUDA context unusable.
    """
    result = functools.partial(SmokeResult, adapter.name, device, None)
    try:
        label = adapter.load()
    except Unavailable as exc:
        return result(Status.SKIP.value, exc.reason, library_error=exc.library_error)
    except Exception as exc:
        reason, text = _library_failure(exc)
        if not isinstance(exc, Refused):
            reason = f"import failed: {reason}"
        return result(Status.FAIL.value, reason, library_error=text)
    if device == "cpu" and not adapter.supports_cpu:
        return result(Status.SKIP.value, f"needs a CUDA GPU ({label} imported fine)")
    if on_loaded is not None:
        on_loaded()

    ran: list[list[int]] = []

    def wrong(reason: str, c: Comparison) -> SmokeResult:
        """`fail`, with the numbers of the comparison that failed."""
        fields = (c.max_abs_err, c.tolerance, c.norm_ratio, c.unwritten)
        return result(Status.FAIL.value, reason, *fields, shapes=ran)

    comparisons: list[tuple[list[int], Comparison]] = []
    timed: float | None = None
    # A MoE adapter builds its own problems (fp4doctor.smoke.moe): (tokens, hidden, inter).
    build = getattr(adapter, "make_case", make_case)
    if shapes is SHAPES:
        shapes = getattr(adapter, "shapes", SHAPES)
    for m, n, k in shapes:
        shape = [m, n, k]
        case = build(m, n, k, device)
        out = case.new_output(device)
        ran.append(shape)
        try:
            call = adapter.bind(case, out)
            call()
            _sync(device)
        except Unavailable as exc:
            return result(
                Status.SKIP.value, exc.reason, shapes=ran, library_error=exc.library_error
            )
        except Exception as exc:
            reason, text = _library_failure(exc)
            status = Status.FAIL
            if _out_of_memory(exc):
                status, reason = Status.ERROR, f"out of memory, no verdict on the kernel: {reason}"
            lost = _context_lost(device)
            if lost:
                reason += " (the CUDA context is lost; the worker is replaced)"
            failed = result(status.value, reason, shapes=ran, library_error=text)
            if lost:
                raise ContextLost(failed) from exc
            return failed
        comparison = check_output(out, case.ref)
        comparisons.append((shape, comparison))
        if not comparison.passed:
            return wrong(f"{_shape_text(shape)}: {comparison.reason}", comparison)
        if timed is None:
            try:
                timed = median_ms(call, device)
            except Exception as exc:
                reason, text = _library_failure(exc)
                failed = result(
                    Status.FAIL.value,
                    f"{_shape_text(shape)}: the first call was right, a repeated call raised: "
                    f"{reason}",
                    shapes=ran,
                    library_error=text,
                )
                if _context_lost(device):
                    raise ContextLost(failed) from exc
                return failed
            again = check_output(out, case.ref)  # out now holds the last timed call's answer
            if not again.passed:
                return wrong(
                    f"{_shape_text(shape)}: the first call was right, repeated calls not: "
                    f"{again.reason}",
                    again,
                )

    worst_shape, worst = max(comparisons, key=lambda sc: sc[1].badness)
    ratios = [c.norm_ratio for _, c in comparisons if c.norm_ratio is not None]
    far = max(ratios, key=lambda r: abs(r - 1.0)) if ratios else None
    reason = (
        f"{len(comparisons)} shapes match the reference; "
        f"closest to the limit at {_shape_text(worst_shape)}: {worst.reason}"
    )
    if timed is not None:
        reason += f"; median {timed:.3g} ms at {_shape_text(shapes[0])}"
    return result(
        Status.PASS.value,
        f"{reason} ({label})",
        worst.max_abs_err,
        worst.tolerance,
        far,
        0,
        timed,
        shapes=ran,
    )
