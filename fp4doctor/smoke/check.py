"""Is a GEMM output right? Elementwise tolerance AND magnitude, every element written.

The criteria are FlashInfer's own fuzzer's (`tests/gemm/test_unified_gemm_fuzz.py`, NVFP4:
atol = 0.12·max|ref| + 1e-3, rtol = 0.1, NaN-poisoned output, no non-finite where the
reference is finite), plus a norm-ratio check: cosine similarity alone passed outputs
25–100x too small in FlashInfer's CI (issue #3398; reference flashinfer-cudnn-fp4.md §3.2).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

ATOL_FRACTION = 0.12
ATOL_FLOOR = 1e-3
RTOL = 0.10
NORM_RATIO_RANGE = (0.9, 1.1)


@dataclass(frozen=True)
class Comparison:
    """The outcome of comparing one output with its reference."""

    passed: bool
    reason: str
    max_abs_err: float | None
    tolerance: float  # atol
    norm_ratio: float | None
    unwritten: int

    @property
    def badness(self) -> float:
        """How close to failing: max error over atol (for picking the worst of several shapes)."""
        if not self.passed:
            return float("inf")
        return (self.max_abs_err or 0.0) / self.tolerance


def check_output(out: torch.Tensor, ref: torch.Tensor) -> Comparison:
    """Compare a GEMM output (any float dtype; NaN where never written) with a float64 reference.

    The checks run in this order and the first that fails names the outcome: every element
    written (no NaN left from the poisoned buffer); no ±inf where the reference is finite;
    ‖out‖/‖ref‖ within 0.9–1.1; |out − ref| ≤ atol + rtol·|ref| everywhere.
    """
    if out.shape != ref.shape:
        raise ValueError(f"output shape {tuple(out.shape)} != reference {tuple(ref.shape)}")
    o = out.detach().to(device="cpu", dtype=torch.float64)
    r = ref.detach().to(device="cpu", dtype=torch.float64)
    total = o.numel()
    atol = ATOL_FRACTION * float(r.abs().max()) + ATOL_FLOOR if total else ATOL_FLOOR
    lo, hi = NORM_RATIO_RANGE

    unwritten = int(torch.isnan(o).sum())
    if unwritten:
        return Comparison(
            False,
            f"{unwritten} of {total} outputs never written (NaN)",
            None,
            atol,
            None,
            unwritten,
        )
    bad_inf = int((torch.isinf(o) & torch.isfinite(r)).sum())
    if bad_inf:
        return Comparison(
            False,
            f"{bad_inf} of {total} outputs are ±inf where the reference is finite",
            None,
            atol,
            None,
            0,
        )

    err = (o - r).abs()
    max_err = float(err.max()) if total else 0.0
    ref_norm = float(torch.linalg.vector_norm(r))
    out_norm = float(torch.linalg.vector_norm(o))
    ratio = out_norm / ref_norm if ref_norm > 0 else (1.0 if out_norm == 0 else float("inf"))
    if not lo <= ratio <= hi:
        if ratio == 0:
            what = "output is all zeros"
        elif ratio < lo:
            what = f"output {1 / ratio:.1f}x too small"
        else:
            what = f"output {ratio:.1f}x too large"
        return Comparison(
            False,
            f"{what}: ||out||/||ref|| = {ratio:.3g} (needs {lo:g}–{hi:g})",
            max_err,
            atol,
            ratio,
            0,
        )

    allowed = atol + RTOL * r.abs()
    excess = err - allowed
    n_bad = int((excess > 0).sum())
    if n_bad:
        worst = int(torch.argmax(excess))
        row, col = divmod(worst, o.shape[1])
        return Comparison(
            False,
            f"max |out-ref| = {max_err:.3g} > tolerance: {n_bad} of {total} outputs outside "
            f"atol {atol:.3g} + {RTOL:g}·|ref| (worst at [{row}, {col}]: "
            f"|out-ref| = {float(err.view(-1)[worst]):.3g} > {float(allowed.view(-1)[worst]):.3g})",
            max_err,
            atol,
            ratio,
            0,
        )
    return Comparison(
        True,
        f"max |out-ref| = {max_err:.3g} within atol {atol:.3g} + {RTOL:g}·|ref|; "
        f"||out||/||ref|| = {ratio:.4f}",
        max_err,
        atol,
        ratio,
        0,
    )
