"""The NVFP4 reference (fp4doctor.nvfp4), read as a specification.

Hand-computed values first, then properties (hypothesis), then cross-checks against the
real FlashInfer installed next to fp4doctor, wherever FlashInfer's code runs on CPU.
Everything here runs on CPU; the GPU suite reuses the same functions on CUDA.
"""

from __future__ import annotations

import importlib
import math
import os
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

# The reference is torch code: without torch (`pip install -e '.[test]'` alone) this module is
# skipped with the reason instead of failing collection.
torch = pytest.importorskip("torch", reason="the NVFP4 reference needs torch (fp4doctor[smoke])")

from fp4doctor import nvfp4  # noqa: E402  (imports torch; only after the skip above)

E4M3 = torch.float8_e4m3fn
# 30 examples per property keeps the module quick on a 2-core CI host; FP4DOCTOR_FUZZ_EXAMPLES
# (as in tests/test_fuzz_inputs.py, e.g. 5000) asks for the long run before a release.
PROPS = settings(max_examples=int(os.environ.get("FP4DOCTOR_FUZZ_EXAMPLES", "30")))


def codes_of(packed: torch.Tensor) -> torch.Tensor:
    """Unpack by hand (low nibble first), independently of the module under test."""
    low = packed & 0x0F
    high = packed >> 4
    return torch.stack((low, high), dim=-1).reshape(packed.shape[0], -1)


def values_of(packed: torch.Tensor) -> torch.Tensor:
    return torch.tensor(nvfp4.E2M1_VALUES)[codes_of(packed).long()]


def bytes_of(t: torch.Tensor) -> torch.Tensor:
    return t.view(torch.uint8)


def next_f32(value: float, toward: float) -> float:
    """The float32 neighbour of ``value`` in the direction of ``toward``."""
    t = torch.tensor(value, dtype=torch.float32)
    return torch.nextafter(t, torch.tensor(toward, dtype=torch.float32)).item()


def round_on_grid(values: list[float]) -> list[float]:
    """E2M1 rounding of each value, through the public API: every block leads with a 6
    and uses global_scale 1, so its block scale is exactly 1 and x * output_scale == x."""
    rows = []
    for i in range(0, len(values), 15):
        chunk = values[i : i + 15]
        rows.append([6.0, *chunk, *([0.0] * (15 - len(chunk)))])
    packed, scales, _ = nvfp4.quantize(torch.tensor(rows), global_scale=1.0)
    assert torch.all(scales.float() == 1.0)
    out = values_of(packed)[:, 1:].reshape(-1)
    return out[: len(values)].tolist()


# --------------------------------------------------------------------------- the format


def test_e2m1_values_are_the_sixteen_codes() -> None:
    assert nvfp4.E2M1_VALUES[:8] == (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
    assert nvfp4.E2M1_VALUES[8:] == tuple(-v for v in nvfp4.E2M1_VALUES[:8])
    assert math.copysign(1.0, nvfp4.E2M1_VALUES[8]) == -1.0  # code 8 is -0


def test_known_block_gives_known_codes_scale_and_bytes() -> None:
    # Block amax 12 with global scale 1: scale = e4m3(12 / 6) = 2 exactly, so x / 2 is
    # the code's value; -0.0 is stored as +0 (code 0).
    x = 2.0 * torch.tensor([nvfp4.E2M1_VALUES])
    packed, scales, gs = nvfp4.quantize(x, global_scale=1.0)
    assert scales.dtype == E4M3 and scales.shape == (1, 1) and scales.float().item() == 2.0
    assert gs.dtype == torch.float32 and gs.dim() == 0 and gs.item() == 1.0
    assert packed.dtype == torch.uint8 and packed.shape == (1, 8)
    assert packed.tolist() == [[0x10, 0x32, 0x54, 0x76, 0x90, 0xBA, 0xDC, 0xFE]]
    assert torch.equal(nvfp4.dequantize(packed, scales, gs), x)


def test_default_global_scale_is_448_times_6_over_amax() -> None:
    # amax 3: gs = 2688 / 3 = 896. Block 0 (amax 3) gets scale 896 * 3 / 6 = 448; block 1
    # (amax 0.75) gets 112; both exact in E4M3, so every value decodes exactly.
    x = torch.zeros(1, 32)
    x[0, 0], x[0, 5] = 3.0, -1.5
    x[0, 16], x[0, 17] = 0.75, -0.25
    packed, scales, gs = nvfp4.quantize(x)
    assert gs.item() == 896.0
    assert scales.float().tolist() == [[448.0, 112.0]]
    assert torch.equal(nvfp4.dequantize(packed, scales, gs), x)


def test_default_global_scale_reads_amax_in_float32_ignoring_nan() -> None:
    x = torch.tensor([[float("nan"), 1.0, -4.0] + [0.0] * 13])
    _, scales, gs = nvfp4.quantize(x)
    assert gs.item() == 672.0  # 2688 / 4
    assert scales.float().item() == 448.0


def test_nibble_order_even_element_in_low_nibble() -> None:
    # Two elements, one block: 1.0 is code 2, -6.0 is code 15 -> byte 0xF2.
    packed, scales, _ = nvfp4.quantize(torch.tensor([[1.0, -6.0]]), 1.0, block_size=2)
    assert scales.float().item() == 1.0
    assert packed.tolist() == [[0xF2]]
    # And decoding a hand-made byte: 0x72 is (code 2 = 1.0, code 7 = 6.0).
    one = torch.tensor([[1.0]], dtype=E4M3)
    assert nvfp4.dequantize(torch.tensor([[0x72]], dtype=torch.uint8), one, 1.0).tolist() == [
        [1.0, 6.0]
    ]
    # The same order in a 16-element block.
    x = torch.zeros(1, 16)
    x[0, 0], x[0, 1] = 1.0, -6.0
    assert nvfp4.quantize(x, 1.0)[0][0, 0].item() == 0xF2


def test_ties_round_to_the_even_code() -> None:
    ties = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0]
    assert round_on_grid(ties) == [0.0, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0]
    assert round_on_grid([-t for t in ties]) == [0.0, -1.0, -1.0, -2.0, -2.0, -4.0, -4.0]


def test_just_off_a_tie_rounds_to_the_nearer_value() -> None:
    up = [next_f32(t, 7.0) for t in (0.25, 1.25, 2.5, 5.0)]
    down = [next_f32(t, 0.0) for t in (0.75, 1.75, 3.5)]
    assert round_on_grid(up) == [0.5, 1.5, 3.0, 6.0]
    assert round_on_grid(down) == [0.5, 1.5, 3.0]


def test_values_that_round_to_zero_are_stored_as_plus_zero() -> None:
    x = torch.zeros(1, 16)
    x[0, 0], x[0, 1], x[0, 2], x[0, 3] = 6.0, -0.1, -0.25, -0.0
    packed, _, _ = nvfp4.quantize(x, 1.0)
    assert codes_of(packed)[0, 1:4].tolist() == [0, 0, 0]


def test_elements_saturate_at_6_and_block_scales_at_448() -> None:
    # gs * amax / 6 = 1000 > 448: the scale saturates (older torch casts gave NaN from
    # 480 up), and x * gs / 448 = 13.4 saturates to code 7.
    x = torch.zeros(1, 16)
    x[0, 0], x[0, 1] = 6.0, -6.0
    packed, scales, _ = nvfp4.quantize(x, 1000.0)
    assert scales.float().item() == 448.0
    assert codes_of(packed)[0, :2].tolist() == [7, 15]


def test_zero_and_underflowing_blocks_have_scale_zero_and_codes_zero() -> None:
    x = torch.zeros(2, 32)
    x[0, :16] = torch.linspace(-1, 1, 16)
    x[1, 16:] = 1e-6  # e4m3(gs * 1e-6 / 6) with gs = 2688 is below E4M3's 2**-9 / 2
    packed, scales, gs = nvfp4.quantize(x)
    assert scales.float().tolist()[0][1] == 0.0
    assert scales.float().tolist()[1] == [0.0, 0.0]
    assert torch.all(codes_of(packed)[0, 16:] == 0) and torch.all(codes_of(packed)[1] == 0)
    assert torch.equal(nvfp4.dequantize(packed, scales, gs)[1], torch.zeros(32))


def test_all_zero_tensor_has_global_scale_one() -> None:
    packed, scales, gs = nvfp4.quantize(torch.zeros(3, 16))
    assert gs.item() == 1.0
    assert not torch.any(bytes_of(scales)) and not torch.any(packed)


def test_low_precision_inputs_and_global_scales_are_read_in_float32() -> None:
    x = torch.randn(5, 32, generator=torch.Generator().manual_seed(1)).to(torch.bfloat16)
    gs_bf16 = (2688.0 / x.float().abs().max()).to(torch.bfloat16)
    packed, scales, gs = nvfp4.quantize(x, gs_bf16)
    assert gs.dtype == torch.float32 and gs.item() == gs_bf16.float().item()
    ref = nvfp4.quantize(x.float(), gs_bf16.float())
    assert torch.equal(packed, ref[0]) and torch.equal(bytes_of(scales), bytes_of(ref[1]))


def test_global_scale_may_be_a_one_element_tensor_or_a_float() -> None:
    x = torch.randn(4, 16, generator=torch.Generator().manual_seed(2))
    a = nvfp4.quantize(x, torch.tensor([5.0]))
    b = nvfp4.quantize(x, 5.0)
    assert a[2].shape == () and torch.equal(a[0], b[0]) and torch.equal(a[2], b[2])


@pytest.mark.parametrize(
    ("args", "error", "match"),
    [
        ((torch.zeros(2, 24),), ValueError, "multiple of block_size = 16"),
        ((torch.zeros(16),), ValueError, "2-D"),
        ((torch.zeros(2, 16, dtype=torch.int32),), TypeError, "floating-point"),
        ((torch.zeros(2, 16), 0.0), ValueError, "positive and finite"),
        ((torch.zeros(2, 16), torch.ones(2)), ValueError, "one value"),
        ((torch.zeros(2, 3), 1.0, 3), ValueError, "even"),
    ],
)
def test_quantize_rejects_bad_input(args: tuple[Any, ...], error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        nvfp4.quantize(*args)


def test_dequantize_accepts_the_uint8_view_and_float4_packed_bytes() -> None:
    x = torch.randn(3, 32, generator=torch.Generator().manual_seed(3))
    packed, scales, gs = nvfp4.quantize(x)
    want = nvfp4.dequantize(packed, scales, gs)
    assert want.dtype == torch.float32 and want.shape == (3, 32)
    assert torch.equal(nvfp4.dequantize(packed, bytes_of(scales), gs), want)
    assert torch.equal(nvfp4.dequantize(packed, scales, gs.item()), want)
    if hasattr(torch, "float4_e2m1fn_x2"):
        fp4 = packed.view(torch.float4_e2m1fn_x2)
        assert torch.equal(nvfp4.dequantize(fp4, scales, gs), want)


def test_dequantize_rejects_mismatched_or_mistyped_scales() -> None:
    packed = torch.zeros(2, 8, dtype=torch.uint8)
    with pytest.raises(ValueError, match="does not fit"):
        nvfp4.dequantize(packed, torch.zeros(3, 1, dtype=E4M3), 1.0)
    with pytest.raises(TypeError, match="float8_e4m3fn"):
        nvfp4.dequantize(packed, torch.zeros(2, 1), 1.0)


def test_snap_is_a_fixed_point_and_reference_gemm_is_float64() -> None:
    gen = torch.Generator().manual_seed(4)
    a, b = torch.randn(7, 64, generator=gen), torch.randn(5, 64, generator=gen)
    pa, sa, ga, a_deq = nvfp4.snap(a)
    b_deq = nvfp4.snap(b)[3]
    again = nvfp4.quantize(a_deq, ga)
    assert torch.equal(again[0], pa) and torch.equal(bytes_of(again[1]), bytes_of(sa))
    ref = nvfp4.reference_gemm(a_deq, b_deq)
    assert ref.dtype == torch.float64 and ref.shape == (7, 5)
    assert torch.allclose(ref, a_deq.double() @ b_deq.double().T)
    with pytest.raises(ValueError, match="K mismatch"):
        nvfp4.reference_gemm(a_deq, b_deq[:, :32])


# --------------------------------------------------------------------------- round trips

# Positive finite E4M3 scale bytes: 0x01 (2**-9) .. 0x7E (448); 0x7F is NaN.
SCALE_BYTES = st.integers(min_value=1, max_value=0x7E)
GLOBAL_SCALES = st.floats(min_value=2.0**-20, max_value=2.0**20, width=32)


def build(codes: torch.Tensor, scale_bytes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    packed = codes[:, 0::2] | (codes[:, 1::2] << 4)
    return packed.to(torch.uint8), scale_bytes.to(torch.uint8).view(E4M3)


def canonical(codes: torch.Tensor) -> torch.Tensor:
    return torch.where(codes == 8, torch.zeros_like(codes), codes)  # -0 is stored as +0


def assert_round_trip(codes: torch.Tensor, scale_bytes: torch.Tensor, gs: float) -> None:
    packed, scales = build(codes, scale_bytes)
    x = nvfp4.dequantize(packed, scales, gs)
    packed2, scales2, gs2 = nvfp4.quantize(x, gs)
    assert torch.equal(bytes_of(scales2), bytes_of(scales))
    assert torch.equal(codes_of(packed2), canonical(codes))
    assert torch.equal(nvfp4.dequantize(packed2, scales2, gs2), x)


@pytest.mark.parametrize("gs", [1.0, 0.37, 2688.0 / 1.7, 1e6])
def test_every_code_with_every_scale_survives_a_round_trip(gs: float) -> None:
    # Each row: one E4M3 scale (all 126 positive finite ones), two blocks that between
    # them hold all 16 codes; each block leads with +-6 so its scale is the one it had.
    scale_bytes = torch.arange(1, 0x7F).repeat_interleave(2).reshape(-1, 2)
    block_a = torch.tensor([7, *range(15)])
    block_b = torch.tensor([15, 15, *range(8, 16), *range(6)])
    codes = torch.cat([block_a, block_b]).repeat(scale_bytes.shape[0], 1)
    assert_round_trip(codes, scale_bytes, gs)


@PROPS
@given(
    data=st.data(),
    rows=st.integers(1, 6),
    blocks=st.integers(1, 4),
    gs=GLOBAL_SCALES,
)
def test_representable_values_survive_a_round_trip(
    data: st.DataObject, rows: int, blocks: int, gs: float
) -> None:
    n = rows * blocks * 16
    codes = torch.tensor(data.draw(st.lists(st.integers(0, 15), min_size=n, max_size=n)))
    codes = codes.reshape(rows * blocks, 16)
    lead = data.draw(
        st.lists(st.sampled_from([7, 15]), min_size=rows * blocks, max_size=rows * blocks)
    )
    codes[:, 0] = torch.tensor(lead)  # the block's amax is 6 * scale
    scale_list = data.draw(st.lists(SCALE_BYTES, min_size=rows * blocks, max_size=rows * blocks))
    scale_bytes = torch.tensor(scale_list).reshape(rows, blocks)
    assert_round_trip(codes.reshape(rows, blocks * 16), scale_bytes, gs)


@PROPS
@given(
    seed=st.integers(0, 2**31 - 1),
    rows=st.integers(1, 40),
    blocks=st.integers(1, 8),
    magnitude=st.floats(-6, 6),
    explicit_gs=st.none() | st.floats(0.1, 10.0),
)
def test_quantisation_error_is_within_half_a_grid_step(
    seed: int, rows: int, blocks: int, magnitude: float, explicit_gs: float | None
) -> None:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, blocks * 16, generator=gen) * 10.0**magnitude
    gs_in = None if explicit_gs is None else explicit_gs * 2688.0 / x.abs().max().item()
    packed, scales, gs = nvfp4.quantize(x, gs_in)
    x_deq = nvfp4.dequantize(packed, scales, gs)

    s = scales.float().repeat_interleave(16, dim=1)
    unit = s / gs  # one unit of the E2M1 grid, in x's units
    y = torch.where(unit > 0, x.abs() / unit, torch.full_like(x, math.inf))
    # Half the spacing of the E2M1 grid around y; a saturated y (scale rounded down,
    # or capped at 448) is at most one full top step away from 6.
    half_step = torch.where(y <= 2, 0.25, torch.where(y <= 4, 0.5, 1.0))
    bound = torch.where(y <= 6, half_step, y - 6 + 1.0) * unit
    err = (x_deq - x).abs()
    zero_block = unit == 0
    assert torch.all(err[~zero_block] <= bound[~zero_block] * (1 + 1e-5) + 1e-30)
    # A block only loses everything when its scale underflows E4M3 (below 2**-10).
    assert torch.all(gs * x.abs()[zero_block] / 6 <= 2.0**-10 * (1 + 1e-5))
    if explicit_gs is None:
        assert scales.float().max().item() == 448.0


# --------------------------------------------------------------------------- layouts


def offsets_128x4(rows: int, cols: int) -> torch.Tensor:
    """TRT-LLM get_sf_out_offset_128x4, transcribed, for every (r, c) in row-major order."""
    r = torch.arange(rows).unsqueeze(1)
    c = torch.arange(cols).unsqueeze(0)
    k_tiles = (cols + 3) // 4
    off = (r // 128) * k_tiles * 512 + (c // 4) * 512 + (r % 32) * 16 + ((r % 128) // 32) * 4
    return (off + c % 4).reshape(-1)


def offsets_8x4(rows: int, cols: int) -> torch.Tensor:
    """TRT-LLM get_sf_out_offset_8x4, transcribed."""
    r = torch.arange(rows).unsqueeze(1)
    c = torch.arange(cols).unsqueeze(0)
    k_tiles = (cols + 3) // 4
    return ((r // 8) * k_tiles * 32 + (c // 4) * 32 + (r % 8) * 4 + c % 4).reshape(-1)


def by_offsets(scales: torch.Tensor, offsets: torch.Tensor, size: int) -> torch.Tensor:
    out = torch.zeros(size, dtype=torch.uint8)
    out[offsets] = bytes_of(scales).reshape(-1)
    return out


def padded(scales: torch.Tensor, rows_to: int) -> torch.Tensor:
    rows, cols = scales.shape
    rp, cp = -(-rows // rows_to) * rows_to, -(-cols // 4) * 4
    out = torch.zeros(rp, cp, dtype=torch.uint8)
    out[:rows, :cols] = bytes_of(scales)
    return out


scale_grids = st.tuples(st.integers(1, 300), st.integers(1, 24), st.integers(0, 2**31 - 1))


def random_scales(rows: int, cols: int, seed: int) -> torch.Tensor:
    # Bytes 1..126: never zero (so padding is told apart), never NaN.
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(1, 0x7F, (rows, cols), generator=gen, dtype=torch.uint8).view(E4M3)


def test_128x4_hand_examples() -> None:
    s = torch.arange(1, 5, dtype=torch.uint8).reshape(4, 1)  # rows 0..3, one column
    out = nvfp4.swizzle_128x4(s)
    assert out.shape == (512,)
    assert out[0].item() == 1 and out[16].item() == 2 and out[32].item() == 3
    big = torch.zeros(129, 5, dtype=torch.uint8)
    big[32, 0], big[0, 4], big[128, 1] = 7, 8, 9
    out = nvfp4.swizzle_128x4(big)
    assert out.shape == (256 * 8,)
    assert out[4].item() == 7 and out[512].item() == 8 and out[1024 + 1].item() == 9


def test_8x4_hand_examples() -> None:
    s = torch.zeros(9, 5, dtype=torch.uint8)
    s[1, 0], s[0, 4], s[8, 3] = 1, 2, 3
    out = nvfp4.swizzle_8x4(s)
    assert out.shape == (16 * 8,)
    assert out[4].item() == 1 and out[32].item() == 2 and out[64 + 3].item() == 3


@PROPS
@given(grid=scale_grids)
def test_128x4_three_formulations_agree_and_invert(grid: tuple[int, int, int]) -> None:
    rows, cols, seed = grid
    s = random_scales(rows, cols, seed)
    rp, cp = -(-rows // 128) * 128, -(-cols // 4) * 4
    out = nvfp4.swizzle_128x4(s)
    assert out.dtype == E4M3 and out.shape == (rp * cp,)
    want = by_offsets(s, offsets_128x4(rows, cols), rp * cp)
    assert torch.equal(bytes_of(out), want)
    view_form = padded(s, 128).view(rp // 128, 4, 32, cp // 4, 4).permute(0, 3, 2, 1, 4)
    assert torch.equal(bytes_of(out), view_form.reshape(-1))
    # Padding: exactly the bytes no (r, c) maps to are zero.
    hit = torch.zeros(rp * cp, dtype=torch.bool)
    hit[offsets_128x4(rows, cols)] = True
    assert not torch.any(bytes_of(out)[~hit]) and torch.all(bytes_of(out)[hit] != 0)
    back = nvfp4.unswizzle_128x4(out, rows, cols)
    assert back.dtype == E4M3 and torch.equal(bytes_of(back), bytes_of(s))
    # FlashInfer passes the same buffer reshaped to [Mp, Kp].
    assert torch.equal(bytes_of(nvfp4.unswizzle_128x4(out.view(rp, cp), rows, cols)), bytes_of(s))
    u8 = nvfp4.swizzle_128x4(bytes_of(s))
    assert u8.dtype == torch.uint8 and torch.equal(u8, bytes_of(out))


@PROPS
@given(grid=scale_grids)
def test_8x4_formulations_agree_and_invert(grid: tuple[int, int, int]) -> None:
    rows, cols, seed = grid
    s = random_scales(rows, cols, seed)
    rp, cp = -(-rows // 8) * 8, -(-cols // 4) * 4
    out = nvfp4.swizzle_8x4(s)
    assert out.dtype == E4M3 and out.shape == (rp * cp,)
    assert torch.equal(bytes_of(out), by_offsets(s, offsets_8x4(rows, cols), rp * cp))
    hit = torch.zeros(rp * cp, dtype=torch.bool)
    hit[offsets_8x4(rows, cols)] = True
    assert not torch.any(bytes_of(out)[~hit])
    assert torch.equal(bytes_of(nvfp4.unswizzle_8x4(out, rows, cols)), bytes_of(s))


def test_unswizzle_rejects_a_buffer_of_the_wrong_size() -> None:
    with pytest.raises(ValueError, match="128 x 4 = 512"):
        nvfp4.unswizzle_128x4(torch.zeros(500, dtype=torch.uint8), 3, 2)
    with pytest.raises(ValueError, match="8 x 4 = 32"):
        nvfp4.unswizzle_8x4(torch.zeros(31, dtype=torch.uint8), 3, 2)


# --------------------------------------------------------------------------- trtllm shuffle

# TRT-LLM's srcToDstBlk32RowMap / srcToDstBlk16RowMap, copied from the C++ tables
# (also in flashinfer/utils.py): source row j of a block goes to destination map[j].
SRC_TO_DST_32 = [0, 8, 16, 24, 1, 9, 17, 25, 2, 10, 18, 26, 3, 11, 19, 27,
                 4, 12, 20, 28, 5, 13, 21, 29, 6, 14, 22, 30, 7, 15, 23, 31]  # fmt: skip
SRC_TO_DST_16 = [0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15]


@pytest.mark.parametrize(("tile", "table"), [(128, SRC_TO_DST_32), (64, SRC_TO_DST_16)])
def test_shuffle_matrix_a_follows_trtllm_row_map(tile: int, table: list[int]) -> None:
    block = len(table)
    rows = 3 * block
    w = torch.arange(rows, dtype=torch.uint8).unsqueeze(1).repeat(1, 4)
    out = nvfp4.shuffle_matrix_a(w, tile)
    for src in range(rows):
        dst = (src // block) * block + table[src % block]
        assert out[dst, 0].item() == src


def test_shuffle_matrix_a_keeps_dtype_and_rejects_ragged_rows() -> None:
    w = torch.randint(0, 256, (64, 8), dtype=torch.uint8)
    if hasattr(torch, "float4_e2m1fn_x2"):
        out = nvfp4.shuffle_matrix_a(w.view(torch.float4_e2m1fn_x2))
        assert out.dtype == torch.float4_e2m1fn_x2
        assert torch.equal(out.view(torch.uint8), nvfp4.shuffle_matrix_a(w))
    with pytest.raises(ValueError, match="multiple of 32"):
        nvfp4.shuffle_matrix_a(w[:48])


@pytest.mark.parametrize(("rows", "cols"), [(128, 4), (256, 7), (384, 1)])
def test_shuffle_matrix_sf_a_linear_and_swizzled_inputs_agree(rows: int, cols: int) -> None:
    s = random_scales(rows, cols, rows + cols)
    out = nvfp4.shuffle_matrix_sf_a(s)
    assert out.dtype == E4M3
    # Rows move exactly as the weight's rows do, then the 128x4 layout applies.
    rows_moved = nvfp4.shuffle_matrix_a(bytes_of(s)).view(E4M3)
    assert torch.equal(bytes_of(out), bytes_of(nvfp4.swizzle_128x4(rows_moved)))
    from_swizzled = nvfp4.shuffle_matrix_sf_a(nvfp4.swizzle_128x4(s), cols=cols)
    assert torch.equal(bytes_of(from_swizzled), bytes_of(out))


def test_shuffle_matrix_sf_a_rejects_bad_shapes() -> None:
    with pytest.raises(ValueError, match="multiple of 128"):
        nvfp4.shuffle_matrix_sf_a(torch.zeros(64, 4, dtype=torch.uint8))
    with pytest.raises(ValueError, match="cols="):
        nvfp4.shuffle_matrix_sf_a(torch.zeros(512, dtype=torch.uint8))


# --------------------------------------------------------------------------- FlashInfer


@pytest.fixture(scope="module")
def fi() -> ModuleType:
    """The real FlashInfer (flashinfer-python), skipped where it is not installed."""
    module: ModuleType = pytest.importorskip("flashinfer")
    return module


def fi_part(module: str, reason: str) -> ModuleType:
    """Import one FlashInfer module, or skip with the reason it does not load here."""
    try:
        return importlib.import_module(module)
    except Exception as exc:  # any import failure is the reason to skip
        pytest.skip(f"{module} does not import on this host ({reason}): {exc!r}")


def ref_helpers(fi: ModuleType) -> ModuleType:
    return fi_part("flashinfer.experimental.b12x.testing.reference.helpers", "FlashInfer tests")


def moe_kernel_helpers(fi: ModuleType) -> ModuleType:
    return fi_part(
        "flashinfer.moe_ep.kernel_src.sm100.next_cutedsl_megamoe.shim.kernel_helpers",
        "torch NVFP4 helpers of the MegaMoE kernels",
    )


def random_inputs() -> list[tuple[torch.Tensor, float | None]]:
    gen = torch.Generator().manual_seed(5)
    cases: list[tuple[torch.Tensor, float | None]] = []
    for i, (m, k) in enumerate([(1, 16), (7, 64), (13, 128), (128, 256), (129, 48), (300, 32)]):
        x = torch.randn(m, k, generator=gen) * 10.0 ** (i - 2)
        if i % 2:
            x = x.to(torch.bfloat16)
        if k > 16:
            x[0, :20] = 0.0  # a zero block, and a partly zero one
        cases.append((x, None))
        cases.append((x, 0.5 * 2688.0 / x.float().abs().max().item()))
    return cases


def test_fi_e2m1_table_matches(fi: ModuleType) -> None:
    from flashinfer.quantization.fp4_quantization import _E2M1_VALUES

    assert torch.equal(_E2M1_VALUES, torch.tensor(nvfp4.E2M1_VALUES))
    assert torch.equal(torch.signbit(_E2M1_VALUES), torch.signbit(torch.tensor(nvfp4.E2M1_VALUES)))


def test_fi_rounding_matches_cast_to_fp4_and_pack_f32_to_fp4(fi: ModuleType) -> None:
    # Every multiple of 1/16 in [-7, 7], and each midpoint with its two neighbours.
    grid = [i / 16 for i in range(-112, 113)]
    for t in (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0):
        for v in (next_f32(t, 0.0), t, next_f32(t, 7.0)):
            grid += [v, -v]
    if len(grid) % 2:
        grid.append(0.0)  # pack_f32_to_fp4 packs pairs
    values = torch.tensor(grid, dtype=torch.float32)
    ours = torch.tensor(round_on_grid(values.clamp(-6, 6).tolist()))

    theirs = ref_helpers(fi).cast_to_fp4(values.clamp(-6, 6))
    assert torch.equal(ours, theirs)

    kh = moe_kernel_helpers(fi)
    packed = kh.pack_f32_to_fp4(values.unsqueeze(0)).view(torch.uint8)
    assert torch.equal(ours, values_of(packed).reshape(-1))


@pytest.mark.parametrize("case", range(12))
def test_fi_quantize_matches_flashinfer_ref_fp4_quant(fi: ModuleType, case: int) -> None:
    x, gs_in = random_inputs()[case]
    packed, scales, gs = nvfp4.quantize(x, gs_in)
    if gs_in is None:  # FlashInfer's tests: (448 * 6) / x.float().abs().nan_to_num().max()
        assert gs.item() == ((448 * 6) / x.float().abs().nan_to_num().max()).item()
    q_ref, s_ref = ref_helpers(fi).ref_fp4_quant(x, gs, 16)
    assert torch.equal(scales.float(), s_ref)
    assert torch.equal(values_of(packed), q_ref.float())


@pytest.mark.parametrize("case", range(12))
def test_fi_block_scales_match_megamoe_quantize_nvfp4_block16(fi: ModuleType, case: int) -> None:
    # Only the scales: that helper scales elements by gs / scale rather than by
    # 1 / (scale * (1 / gs)), so an element a rounding away from a midpoint can differ.
    x, gs_in = random_inputs()[case]
    _, scales, gs = nvfp4.quantize(x, gs_in)
    _, their_scales = moe_kernel_helpers(fi).quantize_nvfp4_block16(x, gs)
    assert torch.equal(bytes_of(scales), bytes_of(their_scales))


@pytest.mark.parametrize("case", range(12))
def test_fi_dequantize_matches_the_cpu_fallback(fi: ModuleType, case: int) -> None:
    from flashinfer.quantization.fp4_quantization import _e2m1_and_ufp8sf_scale_to_float_cpu

    x, gs_in = random_inputs()[case]
    packed, scales, gs = nvfp4.quantize(x, gs_in)
    ours = nvfp4.dequantize(packed, scales, gs)
    # FlashInfer takes the decode scale (1 / gs) and multiplies: one extra rounding.
    theirs = _e2m1_and_ufp8sf_scale_to_float_cpu(packed, bytes_of(scales), 1.0 / gs, 16, 1, False)
    assert torch.allclose(ours, theirs, rtol=2.0**-22, atol=0.0)
    two = torch.tensor(2.0**-3)  # a power of two: both orders are exact
    theirs = _e2m1_and_ufp8sf_scale_to_float_cpu(packed, bytes_of(scales), two, 16, 1, False)
    assert torch.equal(nvfp4.dequantize(packed, scales, 1 / two), theirs)


@pytest.mark.parametrize(
    ("rows", "cols"), [(1, 1), (7, 8), (128, 4), (200, 12), (256, 32), (13, 3)]
)
def test_fi_128x4_matches_flashinfer_torch_layouts(fi: ModuleType, rows: int, cols: int) -> None:
    s = random_scales(rows, cols, 6)
    out = nvfp4.swizzle_128x4(s)
    kh = moe_kernel_helpers(fi)
    assert torch.equal(bytes_of(out), kh.to_blocked(bytes_of(s)))
    assert torch.equal(bytes_of(kh.from_blocked(out, rows, cols)), bytes_of(s))
    gemm_trace = fi_part("flashinfer.trace.templates.gemm", "mm_fp4 trace references")
    assert torch.equal(gemm_trace._unswizzle_sf_128x4(bytes_of(out), rows, cols), bytes_of(s))


def test_fi_128x4_matches_b12x_block_scale_interleave_torch(fi: ModuleType) -> None:
    mod = fi_part(
        "flashinfer.experimental.b12x.moe._shared.kernels.reference_flashinfer",
        "its package imports triton",
    )
    s = random_scales(200, 12, 7)
    assert torch.equal(
        mod._block_scale_interleave_128x4_torch(bytes_of(s)), bytes_of(nvfp4.swizzle_128x4(s))
    )


@pytest.mark.parametrize(("rows", "tile"), [(32, 128), (256, 128), (96, 256), (48, 64), (128, 32)])
def test_fi_shuffle_matrix_a_matches_flashinfer(fi: ModuleType, rows: int, tile: int) -> None:
    from flashinfer.quantization.fp4_quantization import shuffle_matrix_a
    from flashinfer.utils import get_shuffle_matrix_a_row_indices

    w = torch.randint(0, 256, (rows, 24), dtype=torch.uint8, generator=torch.Generator())
    ours = nvfp4.shuffle_matrix_a(w, tile)
    assert torch.equal(ours, shuffle_matrix_a(w, tile))
    assert torch.equal(ours, w[get_shuffle_matrix_a_row_indices(w, tile)])


@pytest.mark.parametrize(("rows", "cols"), [(128, 4), (256, 8), (384, 5)])
def test_fi_shuffle_matrix_sf_a_matches_flashinfer_indices(
    fi: ModuleType, rows: int, cols: int
) -> None:
    # FlashInfer's shuffle_matrix_sf_a = block_scale_interleave(sf[row_indices]); the
    # interleave is a CUDA kernel, so compose its row indices with its torch 128x4.
    from flashinfer.utils import get_shuffle_matrix_sf_a_row_indices

    s = bytes_of(random_scales(rows, cols, 8))
    idx = get_shuffle_matrix_sf_a_row_indices(s, 128)
    want = moe_kernel_helpers(fi).to_blocked(s[idx])
    assert torch.equal(nvfp4.shuffle_matrix_sf_a(s), want)


CUDA_ONLY = pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason="FlashInfer runs this as a CUDA kernel (JIT module fp4_quantization_<sm>); "
    "it needs a CUDA device",
)


@CUDA_ONLY
@pytest.mark.parametrize("what", ["block_scale_interleave", "shuffle_matrix_sf_a", "dequantize"])
def test_fi_cuda_kernels_match(fi: ModuleType, what: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from flashinfer.quantization import fp4_quantization as fq

    monkeypatch.setenv("FLASHINFER_DISABLE_JIT", "1")  # never compile inside the test suite
    monkeypatch.setenv("FLASHINFER_NO_DOWNLOAD", "1")
    gen = torch.Generator().manual_seed(9)
    x = torch.randn(256, 64, generator=gen)
    packed, scales, gs = nvfp4.quantize(x)
    s = bytes_of(scales)
    try:
        if what == "block_scale_interleave":
            got = fq.block_scale_interleave(s.cuda()).cpu()
            want = bytes_of(nvfp4.swizzle_128x4(scales))
        elif what == "shuffle_matrix_sf_a":
            got = fq.shuffle_matrix_sf_a(s.cuda(), 128).cpu()
            want = bytes_of(nvfp4.shuffle_matrix_sf_a(scales))
        else:
            swizzled = bytes_of(nvfp4.swizzle_128x4(scales))
            got = fq.e2m1_and_ufp8sf_scale_to_float(packed, swizzled, 1.0 / gs, 16, 1, True)
            want = nvfp4.dequantize(packed, scales, gs)
    except RuntimeError as exc:  # includes MissingJITCacheError
        pytest.skip(f"FlashInfer's fp4_quantization module is not available: {exc!r}")
    if want.dtype == torch.uint8:
        assert torch.equal(got.reshape(-1), want)
    else:
        assert torch.allclose(got.reshape(want.shape), want, rtol=2.0**-22, atol=0.0)
