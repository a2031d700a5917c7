"""NVFP4 reference: quantise, dequantise, scale-factor layouts, TRT-LLM weight shuffle.

A small pure-PyTorch library, independent of any vendor kernel, that the smoke GEMMs use
to build exact-grid operands and to compute the answer a correct FP4 GEMM must give.
Users can call it to check their own kernels, as ``from fp4doctor import nvfp4``. Every
function runs on the device of its input (CPU or CUDA) and needs nothing beyond ``torch``.

The format (NVFP4)
    * Elements are FP4 E2M1: bit 3 is the sign, bits 2-0 index the magnitudes
      ``0, 0.5, 1, 1.5, 2, 3, 4, 6`` (see :data:`E2M1_VALUES`; code 8 is -0). There is
      no Inf or NaN; the largest magnitude is 6.
    * Two elements per byte: element ``2i`` of a row in the **low** nibble, element
      ``2i+1`` in the **high** nibble (the byte ``torch.float4_e2m1fn_x2`` holds).
    * One FP8 E4M3 block scale per 16 consecutive elements along K (always >= 0).
    * One FP32 global scale per tensor.

Conventions
    * ``global_scale`` is always the **encode** scale, FlashInfer's convention:
      ``global_scale = 448 * 6 / amax(|x|)``, and ``x ~= e2m1 * block_scale / global_scale``.
      torchao stores the inverse (the decode scale, ``amax / (448 * 6)``).
    * A GEMM of two NVFP4 operands multiplies the raw products by
      ``alpha = 1 / (global_scale_a * global_scale_b)`` (FlashInfer ``mm_fp4``'s ``alpha``).
    * Scales returned by :func:`quantize` are in the *linear* layout ``[M, K/16]``; the
      kernels want them swizzled (:func:`swizzle_128x4`, :func:`swizzle_8x4`), the buffer
      shaped as a 2-D grid (:func:`scale_grid`).

The quantisation arithmetic follows FlashInfer's reference ``ref_fp4_quant`` and its CUDA
kernel (``quantization_utils.cuh``, default recipe) operation for operation, in float32::

    block_scale  = e4m3_saturating(global_scale * (block_amax * (1/6)))
    output_scale = 1 / (float(block_scale) * (1 / global_scale))    (0 when the scale is 0)
    code         = e2m1_rne(clamp(x * output_scale, -6, 6))

``e2m1_rne`` rounds to the nearest E2M1 value and breaks ties towards the **even code**
(the one whose mantissa bit is 0), as ``cvt.rn.satfinite.e2m1x2.f32`` does: 0.25 -> 0,
0.75 -> 1, 1.25 -> 1, 1.75 -> 2, 2.5 -> 2, 3.5 -> 4, 5 -> 4. FlashInfer's Python
reference ``cast_to_fp4`` picks the same value at every tie. A value that rounds to zero
is stored as +0 (code 0), never -0; both decode to zero. The CUDA kernel computes the
reciprocals with ``rcp.approx.ftz``, so an element within a rounding error of a midpoint
may land on the neighbouring code there: compare a kernel's bytes with a tolerance.

Sources: ``../shared/reference/flashinfer-cudnn-fp4.md`` sections 2, 3 and 7, and the
FlashInfer source (``flashinfer/quantization/fp4_quantization.py``, ``flashinfer/utils.py``,
``csrc/nv_internal/tensorrt_llm/kernels/quantization_utils.cuh``).
"""

from __future__ import annotations

import torch

__all__ = [
    "E2M1_MAX",
    "E2M1_VALUES",
    "E4M3_MAX",
    "dequantize",
    "quantize",
    "reference_gemm",
    "scale_grid",
    "shuffle_matrix_a",
    "shuffle_matrix_sf_a",
    "snap",
    "swizzle_8x4",
    "swizzle_128x4",
    "unswizzle_8x4",
    "unswizzle_128x4",
]

E2M1_VALUES: tuple[float, ...] = (
    0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
    -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0,
)  # fmt: skip
"""The value of each 4-bit E2M1 code, indexed by code (code 8 is -0.0)."""

E2M1_MAX = 6.0
"""Largest E2M1 magnitude."""

E4M3_MAX = 448.0
"""Largest finite FP8 E4M3 (``float8_e4m3fn``) value; block scales saturate here."""

# Midpoints between consecutive E2M1 magnitudes. A tie at an odd-indexed midpoint
# (0.75, 1.75, 3.5) rounds up to the even code above it; at an even-indexed one
# (0.25, 1.25, 2.5, 5) it rounds down to the even code below it.
_E2M1_MIDPOINTS = (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0)

_DEFAULT_BLOCK_SIZE = 16

# The swizzled scale layouts by their tile's row count, as messages name them.
_LAYOUTS = {128: "a 128x4", 8: "an 8x4"}


# --------------------------------------------------------------------------- helpers


def _round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def _require_2d(t: torch.Tensor, name: str) -> None:
    if t.dim() != 2:
        raise ValueError(f"{name} must be a 2-D tensor, got shape {tuple(t.shape)}")


def _as_bytes(t: torch.Tensor) -> torch.Tensor:
    """A uint8 view of a one-byte tensor (e4m3, e2m1x2, ...), so layout ops stay dtype-agnostic."""
    if t.element_size() == 1 and t.dtype != torch.uint8:
        return t.view(torch.uint8)
    return t


def _padded_shape(rows: int, cols: int, tile_rows: int) -> tuple[int, int]:
    """`[rows, cols]` scales padded to whole tiles: the grid both swizzled layouts are cut from."""
    return _round_up(rows, tile_rows), _round_up(cols, 4)


def _zero_padded(scales: torch.Tensor, tile_rows: int) -> torch.Tensor:
    """`[M, Kb]` scales as bytes, zero-padded to `[round_up(M, tile_rows), round_up(Kb, 4)]`."""
    _require_2d(scales, "scales")
    rows, cols = scales.shape
    src = _as_bytes(scales)
    padded = src.new_zeros(_padded_shape(rows, cols, tile_rows))
    padded[:rows, :cols] = src
    return padded


def _like_dtype(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return t.view(dtype) if t.dtype != dtype else t


def _global_scale_tensor(global_scale: torch.Tensor | float, device: torch.device) -> torch.Tensor:
    """The encode global scale as a float32 0-d tensor on ``device``."""
    if isinstance(global_scale, torch.Tensor):
        if global_scale.numel() != 1:
            raise ValueError(
                f"global_scale must hold one value, got shape {tuple(global_scale.shape)}"
            )
        # Always float32: a bf16 global scale silently corrupted FlashInfer's
        # quantiser before v0.6.13 (issue #3398).
        return global_scale.detach().to(device=device, dtype=torch.float32).reshape(())
    value = float(global_scale)
    if not (value > 0.0 and value < float("inf")):
        raise ValueError(f"global_scale must be positive and finite, got {value}")
    return torch.tensor(value, dtype=torch.float32, device=device)


def _default_global_scale(xf: torch.Tensor) -> torch.Tensor:
    """``448 * 6 / amax(|x|)`` in float32, 1.0 for an all-zero tensor."""
    amax = torch.nan_to_num(xf.abs()).amax() if xf.numel() else xf.new_zeros(())
    gs = torch.where(amax > 0, (E4M3_MAX * E2M1_MAX) / amax, torch.ones_like(amax))
    # amax below ~1e-35 would overflow the encode scale; keep it finite.
    return gs.clamp(max=torch.finfo(torch.float32).max)


def _e2m1_codes(y: torch.Tensor) -> torch.Tensor:
    """Round float32 ``y`` to E2M1 codes (uint8, 0..15): nearest, ties to even, saturating."""
    mag = torch.nan_to_num(y.abs(), nan=0.0).clamp(max=E2M1_MAX)
    mids = torch.tensor(_E2M1_MIDPOINTS, dtype=mag.dtype, device=mag.device)
    below = torch.bucketize(mag, mids, right=False)  # number of midpoints < mag
    upto = torch.bucketize(mag, mids, right=True)  # number of midpoints <= mag
    tie_up = (upto != below) & (below % 2 == 1)
    code = below + tie_up.to(below.dtype)
    negative = (y < 0) & (code != 0)  # zero is always +0
    return (code + 8 * negative.to(code.dtype)).to(torch.uint8)


def _pack_nibbles(codes: torch.Tensor) -> torch.Tensor:
    """[M, K] codes -> [M, K/2] bytes, element 2i in the low nibble, 2i+1 in the high."""
    return codes[:, 0::2] | (codes[:, 1::2] << 4)


def _unpack_nibbles(packed: torch.Tensor) -> torch.Tensor:
    """[M, K/2] bytes -> [M, K] codes (inverse of :func:`_pack_nibbles`)."""
    low = packed & 0x0F
    high = packed >> 4
    return torch.stack((low, high), dim=-1).reshape(packed.shape[0], packed.shape[1] * 2)


# --------------------------------------------------------------------------- quantise


def quantize(
    x: torch.Tensor,
    global_scale: torch.Tensor | float | None = None,
    block_size: int = _DEFAULT_BLOCK_SIZE,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Quantise a 2-D tensor to NVFP4, exactly as FlashInfer's reference does.

    Args:
        x: float tensor ``[M, K]`` (any float dtype; computed in float32). ``K`` must be a
            multiple of ``block_size``.
        global_scale: the **encode** global scale (float or one-element tensor). When
            omitted it is ``448 * 6 / amax(|x|)`` (amax taken in float32 with
            ``nan_to_num``; 1.0 when ``x`` is all zeros), so the largest block scale is 448.
        block_size: elements per block scale; NVFP4 is 16. Other values exist for
            experiments and tests only.

    Returns:
        ``(packed, scales, global_scale)``: ``packed`` uint8 ``[M, K/2]`` (element ``2i``
        in the low nibble), ``scales`` ``torch.float8_e4m3fn`` ``[M, K/block_size]`` in
        the linear layout, and ``global_scale`` a float32 0-d tensor, all on ``x.device``.

    Rounding is to the nearest E2M1 value with ties to the even code, saturating at +-6;
    block scales saturate at 448. A block whose scale is 0 (all zeros, or too small for
    E4M3) has codes 0. NaN elements encode as 0 and are left out of the block amax;
    infinities saturate. Raises ``ValueError`` for a non-2-D ``x`` or a ``K`` that
    ``block_size`` does not divide.
    """
    _require_2d(x, "x")
    if not x.is_floating_point():
        raise TypeError(f"x must be a floating-point tensor, got {x.dtype}")
    if block_size < 1:
        raise ValueError(f"block_size must be positive, got {block_size}")
    m, k = x.shape
    if k % block_size != 0:
        raise ValueError(
            f"K = {k} (x.shape[1]) must be a multiple of block_size = {block_size}; "
            f"pad K to {_round_up(k, block_size)}"
        )
    if k % 2 != 0:
        raise ValueError(f"K = {k} must be even: two E2M1 elements are packed per byte")

    xf = x.detach().to(torch.float32)
    gs = (
        _default_global_scale(xf)
        if global_scale is None
        else _global_scale_tensor(global_scale, x.device)
    )

    blocks = xf.reshape(m, k // block_size, block_size)
    # NaN is skipped (the kernel's fmaxf does the same); inf saturates the scale to 448.
    block_amax = torch.nan_to_num(blocks.abs(), nan=0.0).amax(dim=-1)
    rcp_e2m1_max = torch.tensor(1.0 / E2M1_MAX, dtype=torch.float32, device=x.device)
    # Saturate explicitly: torch's float->e4m3fn cast has not always done so (older
    # versions turned values from 480 up into NaN).
    scales = (gs * (block_amax * rcp_e2m1_max)).clamp(max=E4M3_MAX).to(torch.float8_e4m3fn)

    decode = scales.to(torch.float32) * (1.0 / gs)
    output_scale = torch.where(decode > 0, 1.0 / decode, torch.zeros_like(decode))
    scaled = (blocks * output_scale.unsqueeze(-1)).clamp(-E2M1_MAX, E2M1_MAX)
    codes = _e2m1_codes(scaled.reshape(m, k))
    return _pack_nibbles(codes), scales, gs


def dequantize(
    packed: torch.Tensor,
    scales: torch.Tensor,
    global_scale: torch.Tensor | float,
) -> torch.Tensor:
    """Decode NVFP4 back to float32: ``x = e2m1 * block_scale / global_scale``.

    Args:
        packed: uint8 (or ``torch.float4_e2m1fn_x2``) ``[M, K/2]``, element ``2i`` in the
            low nibble.
        scales: linear-layout block scales ``[M, K/block]`` as ``torch.float8_e4m3fn`` or
            its uint8 bit view. The block size is ``K / scales.shape[1]``. Unswizzle
            kernel-layout scales first (:func:`unswizzle_128x4`, :func:`unswizzle_8x4`).
        global_scale: the **encode** global scale that :func:`quantize` returned.

    Returns:
        float32 ``[M, K]`` on ``packed.device``. ``e2m1 * block_scale`` is exact in
        float32, so each element is the correctly rounded quotient by ``global_scale``.
    """
    _require_2d(packed, "packed")
    _require_2d(scales, "scales")
    packed = _as_bytes(packed)
    if packed.dtype != torch.uint8:
        raise TypeError(f"packed must be uint8 or float4_e2m1fn_x2, got {packed.dtype}")
    if scales.dtype == torch.uint8:
        scales = scales.view(torch.float8_e4m3fn)
    if scales.dtype != torch.float8_e4m3fn:
        raise TypeError(f"scales must be float8_e4m3fn or its uint8 view, got {scales.dtype}")
    m, k = packed.shape[0], packed.shape[1] * 2
    if scales.shape[0] != m or scales.shape[1] == 0 or k % scales.shape[1] != 0:
        raise ValueError(
            f"scales shape {tuple(scales.shape)} does not fit packed shape "
            f"{tuple(packed.shape)}: expected [{m}, K/block] with K = {k}"
        )
    block_size = k // scales.shape[1]
    gs = _global_scale_tensor(global_scale, packed.device)
    lut = torch.tensor(E2M1_VALUES, dtype=torch.float32, device=packed.device)
    values = lut[_unpack_nibbles(packed).long()]
    block_scales = scales.to(device=packed.device, dtype=torch.float32)
    return values * block_scales.repeat_interleave(block_size, dim=1) / gs


def snap(
    x: torch.Tensor, global_scale: torch.Tensor | float | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Snap ``x`` onto the NVFP4 grid: :func:`quantize` then :func:`dequantize`.

    Returns ``(packed, scales, global_scale, x_deq)``. ``x_deq`` (float32) is exactly
    representable, so ``quantize(x_deq, global_scale)`` gives back the same bytes, and a
    correct GEMM on ``packed``/``scales`` must reproduce ``x_deq``'s product up to
    accumulation error.
    """
    packed, scales, gs = quantize(x, global_scale)
    return packed, scales, gs, dequantize(packed, scales, gs)


def reference_gemm(a_deq: torch.Tensor, b_deq: torch.Tensor) -> torch.Tensor:
    """The product a correct NVFP4 GEMM must compute: ``a_deq @ b_deq.T`` in float64.

    ``a_deq`` is ``[M, K]`` and ``b_deq`` the ``[N, K]`` weight, both already dequantised
    (the global scales are inside them, so no ``alpha`` applies). Returns ``[M, N]``.
    """
    _require_2d(a_deq, "a_deq")
    _require_2d(b_deq, "b_deq")
    if a_deq.shape[1] != b_deq.shape[1]:
        raise ValueError(
            f"K mismatch: a_deq is {tuple(a_deq.shape)}, b_deq is {tuple(b_deq.shape)} "
            "(b_deq is the [N, K] weight)"
        )
    return a_deq.to(torch.float64) @ b_deq.to(torch.float64).T


# --------------------------------------------------------------------------- layouts


def swizzle_128x4(scales: torch.Tensor) -> torch.Tensor:
    """Linear ``[M, Kb]`` block scales -> the 128x4 swizzled layout, flat.

    The layout of cuBLAS/cuDNN ``F8_128x4`` and FlashInfer's default ``SfLayout``. Rows are
    zero-padded to ``Mp = round_up(M, 128)`` and columns to ``Kp = round_up(Kb, 4)``;
    element ``(r, c)`` lands at::

        (r // 128) * (Kp // 4) * 512 + (c // 4) * 512
            + (r % 32) * 16 + ((r % 128) // 32) * 4 + (c % 4)

    (``get_sf_out_offset_128x4`` in TRT-LLM's ``quantization_utils.cuh``). Returns a 1-D
    tensor of ``Mp * Kp`` elements with the input's dtype (uint8 or float8_e4m3fn);
    padding is zero. FlashInfer hands this buffer around reshaped to ``[Mp, Kp]``.
    """
    padded = _zero_padded(scales, 128)
    rows_p, cols_p = padded.shape
    # Each 128x4 tile becomes a 32x16 tile: row j holds rows j, j+32, j+64, j+96.
    out = padded.view(rows_p // 128, 4, 32, cols_p // 4, 4).permute(0, 3, 2, 1, 4).reshape(-1)
    return _like_dtype(out, scales.dtype)


def unswizzle_128x4(swizzled: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    """Inverse of :func:`swizzle_128x4`: a 128x4 buffer -> linear ``[rows, cols]``.

    ``swizzled`` may be flat or FlashInfer's ``[Mp, Kp]`` view of the same buffer; it
    must hold ``round_up(rows, 128) * round_up(cols, 4)`` elements. Padding is dropped.
    """
    grid = scale_grid(_as_bytes(swizzled), rows, cols)
    rows_p, cols_p = grid.shape
    tiles = grid.view(rows_p // 128, cols_p // 4, 32, 4, 4).permute(0, 3, 2, 1, 4)
    out = tiles.reshape(rows_p, cols_p)[:rows, :cols].contiguous()
    return _like_dtype(out, swizzled.dtype)


def swizzle_8x4(scales: torch.Tensor) -> torch.Tensor:
    """Linear ``[M, Kb]`` block scales -> the 8x4 layout (TRT-LLM's small-M A layout), flat.

    Rows are zero-padded to ``Mp = round_up(M, 8)``, columns to ``Kp = round_up(Kb, 4)``;
    element ``(r, c)`` lands at
    ``(r // 8) * (Kp // 4) * 32 + (c // 4) * 32 + (r % 8) * 4 + (c % 4)``
    (``get_sf_out_offset_8x4``). Used by FlashInfer's trtllm backend with
    ``use_8x4_sf_layout=True``. Returns a 1-D tensor with the input's dtype.
    """
    padded = _zero_padded(scales, 8)
    rows_p, cols_p = padded.shape
    out = padded.view(rows_p // 8, 8, cols_p // 4, 4).permute(0, 2, 1, 3).reshape(-1)
    return _like_dtype(out, scales.dtype)


def unswizzle_8x4(swizzled: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    """Inverse of :func:`swizzle_8x4`: an 8x4 buffer -> linear ``[rows, cols]``."""
    grid = scale_grid(_as_bytes(swizzled), rows, cols, tile_rows=8)
    rows_p, cols_p = grid.shape
    tiles = grid.view(rows_p // 8, cols_p // 4, 8, 4).permute(0, 2, 1, 3)
    out = tiles.reshape(rows_p, cols_p)[:rows, :cols].contiguous()
    return _like_dtype(out, swizzled.dtype)


def scale_grid(swizzled: torch.Tensor, rows: int, cols: int, tile_rows: int = 128) -> torch.Tensor:
    """A swizzled scale buffer as the 2-D grid kernels take: ``[Mp, Kp]``.

    ``rows`` and ``cols`` are the linear scales' shape ``[M, Kb]``; ``Mp = round_up(M,
    tile_rows)`` and ``Kp = round_up(Kb, 4)``. ``tile_rows`` is 128 for the 128x4 layout
    (:func:`swizzle_128x4`, :func:`shuffle_matrix_sf_a`), 8 for the 8x4 one
    (:func:`swizzle_8x4`). FlashInfer's ``mm_fp4``, vLLM's ``cutlass_scaled_fp4_mm`` and
    cuDNN's ``F8_128x4`` tensors take the buffer so. The buffer may be flat or already 2-D; the
    result keeps its dtype. Raises ``ValueError`` when it holds another number of elements.
    """
    if tile_rows not in _LAYOUTS:
        raise ValueError(f"tile_rows is 128 (the 128x4 layout) or 8 (the 8x4 one), got {tile_rows}")
    rows_p, cols_p = _padded_shape(rows, cols, tile_rows)
    flat = swizzled.reshape(-1)
    if flat.numel() != rows_p * cols_p:
        raise ValueError(
            f"{_LAYOUTS[tile_rows]} buffer for [{rows}, {cols}] scales holds {rows_p} x "
            f"{cols_p} = {rows_p * cols_p} elements, got {flat.numel()}"
        )
    return flat.view(rows_p, cols_p)


# --------------------------------------------------------------------------- trtllm shuffle


def _shuffle_block_rows(epilogue_tile_m: int) -> int:
    # FlashInfer get_shuffle_block_size: 32-row blocks when the tile is a multiple of 128.
    return 32 if epilogue_tile_m % 128 == 0 else 16


def _shuffle_row_indices(rows: int, epilogue_tile_m: int, device: torch.device) -> torch.Tensor:
    """Source row for each destination row of TRT-LLM's ``shuffleMatrixA``.

    Within each block of ``b`` rows (32, or 16 for tiles that are not a multiple of 128)
    source row ``j`` moves to ``(j % (b/8)) * 8 + j // (b/8)`` (TRT-LLM's
    ``srcToDstBlk32RowMap`` / ``srcToDstBlk16RowMap``): the block, read as an
    ``[8, b/8]`` grid of rows, is transposed.
    """
    block = _shuffle_block_rows(epilogue_tile_m)
    if rows % block != 0:
        raise ValueError(
            f"the trtllm weight shuffle (epilogue_tile_m={epilogue_tile_m}) needs the row "
            f"count to be a multiple of {block}, got {rows}; zero-pad the rows"
        )
    group = block // 8
    src = torch.arange(rows, device=device).view(rows // block, 8, group)
    return src.transpose(1, 2).reshape(-1)


def shuffle_matrix_a(packed: torch.Tensor, epilogue_tile_m: int = 128) -> torch.Tensor:
    """TRT-LLM's ``shuffleMatrixA`` row shuffle of a weight, as FlashInfer's trtllm
    backend expects (``nvfp4_quantize(..., do_shuffle=True)``).

    ``packed`` is the row-major ``[N, K/2]`` weight (uint8 or ``float4_e2m1fn_x2``; any
    2-D tensor works, only rows move). ``N`` must be a multiple of 32 (16 when
    ``epilogue_tile_m`` is not a multiple of 128). Returns a shuffled copy, same dtype.
    """
    _require_2d(packed, "packed")
    idx = _shuffle_row_indices(packed.shape[0], epilogue_tile_m, packed.device)
    return _like_dtype(_as_bytes(packed).index_select(0, idx), packed.dtype)


def shuffle_matrix_sf_a(
    scales: torch.Tensor, epilogue_tile_m: int = 128, *, cols: int | None = None
) -> torch.Tensor:
    """TRT-LLM's ``shuffleMatrixSfA``: shuffle block-scale rows like :func:`shuffle_matrix_a`,
    then lay them out 128x4. Returns a flat buffer (FlashInfer reshapes it to ``[N, Kp]``).

    Args:
        scales: either the linear ``[N, Kb]`` scales (what FlashInfer's
            ``shuffle_matrix_sf_a`` takes; ``N`` a multiple of 128), or a flat 128x4
            buffer (what TRT-LLM-gen's ``shuffleMatrixSfA`` takes); uint8 or float8_e4m3fn.
        epilogue_tile_m: as for :func:`shuffle_matrix_a`.
        cols: for a flat 128x4 input only, the number of scale columns ``Kb`` (the
            buffer alone does not tell rows from columns).

    Both inputs give the same bytes: ``swizzle_128x4(linear[row_indices])``.
    """
    if scales.dim() == 1:
        if cols is None:
            raise ValueError("a flat 128x4 scale buffer needs cols= (the scale columns Kb)")
        cols_p = _round_up(cols, 4)
        if cols_p == 0 or scales.numel() % (128 * cols_p) != 0:
            raise ValueError(
                f"a 128x4 buffer of {scales.numel()} elements does not hold whole 128-row "
                f"tiles of {cols_p} padded columns"
            )
        linear = unswizzle_128x4(scales, scales.numel() // cols_p, cols)
    elif scales.dim() == 2:
        linear = scales
    else:
        raise ValueError(
            f"scales must be linear [N, Kb] or a flat 128x4 buffer, got {tuple(scales.shape)}"
        )
    if linear.shape[0] % 128 != 0:
        raise ValueError(
            f"shuffle_matrix_sf_a needs the row count to be a multiple of 128, got "
            f"{linear.shape[0]}; zero-pad the weight rows"
        )
    idx = _shuffle_row_indices(linear.shape[0], epilogue_tile_m, linear.device)
    shuffled = _like_dtype(_as_bytes(linear).index_select(0, idx), linear.dtype)
    return swizzle_128x4(shuffled)
