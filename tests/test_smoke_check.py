"""The smoke check, as a specification: what passes, and what each failure says."""

from __future__ import annotations

import pytest

# The check compares torch tensors: without torch (`pip install -e '.[test]'` alone) this module
# is skipped with the reason instead of failing collection.
torch = pytest.importorskip("torch", reason="the smoke check needs torch (fp4doctor[smoke])")

from fp4doctor.smoke.check import (  # noqa: E402  (imports torch; only after the skip above)
    ATOL_FLOOR,
    ATOL_FRACTION,
    RTOL,
    check_output,
)
from fp4doctor.smoke.errors import summarize, telling_line  # noqa: E402


@pytest.fixture
def ref() -> torch.Tensor:
    gen = torch.Generator().manual_seed(0)
    return torch.randn(64, 128, generator=gen, dtype=torch.float64) * 10


def test_the_exact_answer_in_bf16_passes(ref: torch.Tensor) -> None:
    v = check_output(ref.to(torch.bfloat16), ref)
    assert v.passed
    assert v.unwritten == 0
    assert v.norm_ratio == pytest.approx(1.0, abs=1e-3)
    assert v.tolerance == pytest.approx(ATOL_FRACTION * float(ref.abs().max()) + ATOL_FLOOR)
    assert v.max_abs_err is not None and 0 < v.max_abs_err < v.tolerance
    assert "within atol" in v.reason and "||out||/||ref|| = 1.00" in v.reason


def test_unwritten_outputs_are_counted(ref: torch.Tensor) -> None:
    out = ref.to(torch.bfloat16)
    out[:10, :] = float("nan")
    v = check_output(out, ref)
    assert not v.passed
    assert v.unwritten == 1280
    assert v.reason == "1280 of 8192 outputs never written (NaN)"


def test_inf_where_the_reference_is_finite_fails(ref: torch.Tensor) -> None:
    out = ref.clone()
    out[3, 4] = float("inf")
    out[5, 6] = float("-inf")
    v = check_output(out, ref)
    assert not v.passed
    assert v.reason == "2 of 8192 outputs are ±inf where the reference is finite"


def test_an_output_30x_too_small_fails_on_the_norm(ref: torch.Tensor) -> None:
    # Cosine similarity would call this perfect.
    v = check_output(ref / 30, ref)
    assert not v.passed
    assert v.norm_ratio == pytest.approx(1 / 30)
    assert v.reason.startswith("output 30.0x too small: ||out||/||ref|| = 0.0333 (needs 0.9–1.1)")


def test_an_output_too_large_fails_on_the_norm(ref: torch.Tensor) -> None:
    v = check_output(ref * 2, ref)
    assert not v.passed
    assert v.reason.startswith("output 2.0x too large: ||out||/||ref|| = 2")


def test_all_zeros_says_so(ref: torch.Tensor) -> None:
    v = check_output(torch.zeros_like(ref), ref)
    assert not v.passed
    assert v.reason.startswith("output is all zeros")


def test_right_magnitude_wrong_places_fails_elementwise(ref: torch.Tensor) -> None:
    out = torch.roll(ref, shifts=1, dims=1)
    v = check_output(out, ref)
    assert not v.passed
    assert 0.9 <= (v.norm_ratio or 0) <= 1.1  # the norm alone would not catch it
    assert v.max_abs_err == pytest.approx(float((out - ref).abs().max()))
    assert v.reason.startswith(f"max |out-ref| = {v.max_abs_err:.3g} > tolerance")
    assert "outputs outside atol" in v.reason and "worst at [" in v.reason


@pytest.mark.parametrize(("factor", "passed"), [(0.99, True), (1.01, False)])
def test_the_elementwise_bound_is_atol_plus_rtol_ref(
    ref: torch.Tensor, factor: float, passed: bool
) -> None:
    atol = ATOL_FRACTION * float(ref.abs().max()) + ATOL_FLOOR
    out = ref.clone()
    out[7, 9] += factor * (atol + RTOL * abs(float(ref[7, 9])))
    v = check_output(out, ref)
    assert v.passed is passed
    if not passed:
        assert "1 of 8192 outputs outside" in v.reason and "worst at [7, 9]" in v.reason


def test_shape_mismatch_is_a_programming_error(ref: torch.Tensor) -> None:
    with pytest.raises(ValueError, match="shape"):
        check_output(ref[:, :10], ref)


CUDNN_H200 = (
    "cudnn._compiled_module.cudnnGraphNotSupportedError: no engine — python or backend — "
    "proposed a plan for this graph (the backend declined: No valid engine configs for _\n"
    '{"engineId":0,"smVersion":900}\n'
    "Warning: CUDNN_STATUS_NOT_SUPPORTED; Reason: The cublasLt engine returns not supported\n"
    "Warning: CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH; Reason: FORT_NATIVE_10X engine is only "
    "supported since Blackwell architecture at: !(1000 <= deviceVer && deviceVer < 1200)\n"
)


def test_the_telling_line_of_cudnns_refusal_is_the_blackwell_one() -> None:
    line = telling_line(CUDNN_H200)
    assert line.startswith("cudnn._compiled_module.cudnnGraphNotSupportedError: no engine")
    assert "FORT_NATIVE_10X engine is only supported since Blackwell" in line
    assert "\n" not in line


def test_a_one_line_error_is_its_own_reason() -> None:
    exc = ValueError("mm_fp4 does not support backend 'cudnn' with capability 90")
    reason, text = summarize(exc)
    assert reason == "ValueError: mm_fp4 does not support backend 'cudnn' with capability 90"
    assert text == reason


def test_library_error_text_is_trimmed() -> None:
    _, text = summarize(RuntimeError("x" * 10_000))
    assert len(text) <= 2000 and text.endswith("…")
