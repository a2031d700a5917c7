"""Safetensors headers, read with the standard library: never a byte of tensor data.

A `.safetensors` file starts with an 8-byte little-endian header length and a JSON header that
maps each tensor name to its dtype, shape and data offsets
(https://github.com/huggingface/safetensors, README "Format"). Two bounded reads per file: the
length, then the header. The safetensors library itself refuses headers over 100 MB
(safetensors/src/tensor.rs MAX_HEADER_SIZE), and so does this reader.
"""

from __future__ import annotations

import reprlib
import struct
from dataclasses import dataclass
from pathlib import Path

from fp4doctor.checkpoint.errors import CheckpointError
from fp4doctor.checkpoint.files import open_regular, parse_json, read_bytes

MAX_HEADER_BYTES = 100_000_000
INDEX_NAME = "model.safetensors.index.json"
MAX_INDEX_BYTES = 64_000_000


@dataclass(frozen=True)
class TensorInfo:
    """What a header says of one tensor (the data itself is never read)."""

    name: str
    dtype: str  # safetensors spelling: U8, F8_E4M3, F32, BF16 ...
    shape: tuple[int, ...]


def read_header(path: Path) -> dict[str, TensorInfo]:
    """The tensors of one `.safetensors` file, from its header alone."""
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
    out: dict[str, TensorInfo] = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        if not isinstance(entry, dict):
            raise CheckpointError(f"{path}: tensor {name!r} has no dtype/shape entry")
        dtype, shape = entry.get("dtype"), entry.get("shape")
        if not isinstance(dtype, str) or not isinstance(shape, list):
            raise CheckpointError(f"{path}: tensor {name!r}: 'dtype' or 'shape' is missing")
        if not all(_dimension(d) for d in shape):
            shown = reprlib.repr(shape)  # a 4,000-digit dimension is not a message
            raise CheckpointError(f"{path}: tensor {name!r}: 'shape' {shown} is not a shape")
        out[name] = TensorInfo(name, dtype, tuple(shape))
    return out


def _dimension(value: object) -> bool:
    # safetensors keeps a shape as Vec<usize> (safetensors/src/tensor.rs TensorInfo): 64 bits.
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 64


def read_index(path: Path) -> dict[str, str]:
    """`weight_map` of a sharded checkpoint's index: tensor name -> shard file name."""
    data = parse_json(read_bytes(path, MAX_INDEX_BYTES, "an index"), path, "an index")
    weight_map = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(weight_map, dict) or not all(type(v) is str for v in weight_map.values()):
        raise CheckpointError(f"{path}: key 'weight_map' is missing or not a name -> file map")
    return weight_map
