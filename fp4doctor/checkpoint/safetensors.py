"""Safetensors headers, read with the standard library: never a byte of tensor data.

A `.safetensors` file starts with an 8-byte little-endian header length and a JSON header that
maps each tensor name to its dtype, shape and data offsets
(https://github.com/huggingface/safetensors, README "Format"). Two bounded reads per file: the
length, then the header. The safetensors library itself refuses headers over 100 MB
(safetensors/src/tensor.rs MAX_HEADER_SIZE), and so does this reader.

The one exception to "never tensor data": `read_scalars` reads the bytes of per-tensor scalar
scales (`weight_scale_2`, `input_scale`, ...: F32, at most `MAX_SCALAR_ELEMENTS` values, 4 bytes
each), one bounded `pread` each, only within the file's size (a header whose offsets run past the
end of the file is reported, never followed).
"""

from __future__ import annotations

import os
import reprlib
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from fp4doctor.checkpoint.errors import CheckpointError
from fp4doctor.checkpoint.files import open_regular, parse_json, read_bytes

MAX_HEADER_BYTES = 100_000_000
INDEX_NAME = "model.safetensors.index.json"
MAX_INDEX_BYTES = 64_000_000
MAX_SCALAR_ELEMENTS = 16  # a fused module's per-part scales; a scalar scale is 1


class TensorInfo(NamedTuple):
    """What a header says of one tensor (a tuple: a checkpoint has 100,000s of them)."""

    name: str
    dtype: str  # safetensors spelling: U8, F8_E4M3, F32, BF16 ...
    shape: tuple[int, ...]
    # Where its bytes are in the file (absolute: past the length and the header), when the
    # header gives valid `data_offsets`; None for a header without them, or from the Hub.
    span: tuple[int, int] | None = None

    @property
    def elements(self) -> int:
        count = 1
        for d in self.shape:
            count *= d
        return count


@dataclass
class Scalars:
    """What `read_scalars` read of one file: each scalar tensor's values, the names whose bytes
    lie past the end of the file, and how many bytes were read."""

    values: dict[str, tuple[float, ...]] = field(default_factory=dict)
    beyond: list[str] = field(default_factory=list)
    header_only: bool = False  # the file holds no tensor data at all (a header-only copy)
    bytes_read: int = 0


def read_header(path: Path) -> dict[str, TensorInfo]:
    """The tensors of one `.safetensors` file, from its header alone."""
    return read_header_sized(path)[0]


def read_header_sized(path: Path) -> tuple[dict[str, TensorInfo], int]:
    """The tensors of one `.safetensors` file, and the bytes its header took (8 + length)."""
    with open_regular(path) as f:
        try:
            head = f.read(8)
            if len(head) < 8:
                raise CheckpointError(f"{path}: shorter than the 8-byte safetensors header length")
            (size,) = struct.unpack("<Q", head)
            if size > MAX_HEADER_BYTES:
                raise CheckpointError(
                    f"{path}: header length {size} bytes is over {MAX_HEADER_BYTES} "
                    "(not a safetensors file, or a damaged one)"
                )
            raw = f.read(size)
        except OSError as exc:
            raise CheckpointError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if len(raw) < size:
        raise CheckpointError(
            f"{path}: header cut short ({len(raw)} of {size} bytes): a partial download?"
        )
    header = parse_json(raw, path, "a safetensors header")
    if not isinstance(header, dict):
        raise CheckpointError(f"{path}: the safetensors header is not a JSON object")
    start = 8 + size
    out: dict[str, TensorInfo] = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        if type(entry) is not dict:
            raise CheckpointError(f"{path}: tensor {name!r} has no dtype/shape entry")
        dtype, shape = entry.get("dtype"), entry.get("shape")
        if type(dtype) is not str or type(shape) is not list:
            raise CheckpointError(f"{path}: tensor {name!r}: 'dtype' or 'shape' is missing")
        for d in shape:  # a loop, not all(): 100,000s of tensors
            if type(d) is not int or not 0 <= d < _LIMIT:
                shown = reprlib.repr(shape)  # a 4,000-digit dimension is not a message
                raise CheckpointError(f"{path}: tensor {name!r}: 'shape' {shown} is not a shape")
        out[name] = TensorInfo(name, dtype, tuple(shape), _span(entry.get("data_offsets"), start))
    return out, start


# safetensors keeps a shape and offsets as usize (safetensors/src/tensor.rs TensorInfo): 64 bits.
_LIMIT = 1 << 64


def _span(offsets: object, start: int) -> tuple[int, int] | None:
    """The absolute byte range of `data_offsets` [begin, end), None unless two whole numbers
    0 <= begin <= end < 2**64 (anything else is never used to read)."""
    if type(offsets) is not list or len(offsets) != 2:
        return None
    begin, end = offsets
    if type(begin) is not int or type(end) is not int or not 0 <= begin <= end < _LIMIT:
        return None
    return (start + begin, start + end)


def read_scalars(path: Path, tensors: Iterable[TensorInfo]) -> Scalars:
    """The values of the F32 tensors of at most MAX_SCALAR_ELEMENTS elements among `tensors`
    (`path`'s header): one `pread` of at most 64 bytes each, never past the end of the file;
    and every tensor whose bytes the file does not hold (`beyond`: a partial download), unless
    the file holds no tensor data at all (`header_only`)."""
    out = Scalars()
    spans = [t for t in tensors if t.span is not None]
    wanted = [
        t for t in spans
        if t.dtype == "F32" and len(t.shape) <= 1 and t.span is not None
        and 0 < t.span[1] - t.span[0] == 4 * t.elements <= 4 * MAX_SCALAR_ELEMENTS
    ]  # fmt: skip
    if not spans:
        return out
    with open_regular(path) as f:
        fd = f.fileno()
        size = os.fstat(fd).st_size
        out.header_only = size <= _header_end(fd)
        if out.header_only:
            return out
        out.beyond = [t.name for t in spans if t.span is not None and t.span[1] > size]
        for t in sorted(wanted, key=lambda t: t.span or (0, 0)):
            begin, end = t.span or (0, 0)
            if end > size:
                continue
            try:
                raw = os.pread(fd, end - begin, begin)
            except OSError as exc:
                raise CheckpointError(f"{path}: cannot be read ({exc.strerror or exc})") from None
            out.bytes_read += len(raw)
            if len(raw) < end - begin:  # shrank since the fstat above
                out.beyond.append(t.name)
                continue
            out.values[t.name] = struct.unpack(f"<{t.elements}f", raw)
    return out


def _header_end(fd: int) -> int:
    """Where the tensor data of the open file `fd` begins (8 + the header length)."""
    head = os.pread(fd, 8, 0)
    return 8 + struct.unpack("<Q", head)[0] if len(head) == 8 else 8


def read_index(path: Path) -> dict[str, str]:
    """`weight_map` of a sharded checkpoint's index: tensor name -> shard file name."""
    data = parse_json(read_bytes(path, MAX_INDEX_BYTES, "an index"), path, "an index")
    weight_map = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(weight_map, dict) or not all(type(v) is str for v in weight_map.values()):
        raise CheckpointError(f"{path}: key 'weight_map' is missing or not a name -> file map")
    return weight_map
