"""One smoke GEMM's outcome on one device, as plain data (no torch: the main process reads it)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from fp4doctor.findings import Status

STATUSES = tuple(s.value for s in (Status.PASS, Status.FAIL, Status.ERROR, Status.SKIP))
"""`pass`: ran and matched the reference. `fail`: the library refused, or the output is wrong.
`error`: no verdict (the worker crashed, timed out, or could not start). `skip`: not run here
(library not installed, needs a GPU, needs a JIT compile that is not allowed)."""


@dataclass(frozen=True)
class SmokeResult:
    """What one adapter's smoke GEMM did on one device.

    `reason` is one line with the measured and the required values, or the library's own
    error text (its first line and its most telling line). `library_error` keeps the longer
    text (up to ~2000 characters) for `-v` output and bug reports.
    """

    adapter: str
    device: str  # "cuda:0" (index as the engine sees it) or "cpu"
    gpu: int | None  # None for cpu
    status: str  # one of STATUSES
    reason: str
    max_abs_err: float | None = None
    tolerance: float | None = None  # atol used
    norm_ratio: float | None = None  # ||out|| / ||ref||
    unwritten: int | None = None  # elements still NaN after the call
    median_ms: float | None = None
    shapes: list[list[int]] | None = None  # [[m, n, k], ...] run
    library_error: str | None = None

    def to_dict(self) -> dict[str, object]:
        """Every field, `None` included, so the JSON shape is the same for every result."""
        data = dataclasses.asdict(self)
        if self.shapes is not None:
            data["shapes"] = [list(s) for s in self.shapes]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> SmokeResult:
        """Rebuild a result from `to_dict` output (or a worker's protocol line); unknown keys
        are ignored so an older reader accepts a newer worker's lines."""
        names = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in names}
        status = kwargs.get("status")
        if status not in STATUSES:
            raise ValueError(f"unknown smoke status {status!r} (expected one of {STATUSES})")
        return cls(**kwargs)  # type: ignore[arg-type]
