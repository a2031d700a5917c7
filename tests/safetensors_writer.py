"""Small real NVFP4 checkpoints for the content tests: safetensors files with their data.

A `.safetensors` file is an 8-byte little-endian header length, a JSON header (each tensor's
dtype, shape and `data_offsets` into the data that follows; `__metadata__` free-form) padded with
spaces to 8 bytes, then the data (https://github.com/huggingface/safetensors, README "Format").
Written here with the standard library (the `safetensors` package is not among the test
dependencies). Tensor data is zeros except the scalar scales, whose values the tests set.

`moe_checkpoint` lays out a Qwen3-MoE-shaped checkpoint (attention, routed experts with gate, up
and down projections), small enough to write in milliseconds, in either NVFP4 format. The tests
change it through `Layout` (a tensor left out, a scale's value, a dtype) before it is written.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DTYPE_BYTES = {"U8": 1, "F8_E4M3": 1, "F32": 4, "BF16": 2, "F16": 2}
MODELOPT = "modelopt"
CT = "compressed-tensors"


@dataclass
class Tensor:
    dtype: str
    shape: list[int]
    value: float | None = None  # an F32 tensor's every element; None: zeros

    def data(self) -> bytes:
        count = 1
        for d in self.shape:
            count *= d
        if self.dtype == "F32" and self.value is not None:
            return struct.pack(f"<{count}f", *([self.value] * count))
        return bytes(count * DTYPE_BYTES[self.dtype])


def write_safetensors(path: Path, tensors: dict[str, Tensor]) -> None:
    """A real safetensors file: header, then every tensor's bytes in order."""
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    chunks: list[bytes] = []
    offset = 0
    for name, t in tensors.items():
        data = t.data()
        header[name] = {"dtype": t.dtype, "shape": t.shape,
                        "data_offsets": [offset, offset + len(data)]}  # fmt: skip
        chunks.append(data)
        offset += len(data)
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"".join(chunks))


@dataclass
class Layout:
    """A checkpoint before it is written: config, quantisation config and tensors per shard."""

    config: dict[str, Any]
    hf_quant: dict[str, Any] | None
    shards: list[dict[str, Tensor]] = field(default_factory=list)

    def find(self, name: str) -> tuple[dict[str, Tensor], Tensor]:
        for shard in self.shards:
            if name in shard:
                return shard, shard[name]
        raise KeyError(name)

    def drop(self, name: str) -> None:
        shard, _ = self.find(name)
        del shard[name]

    def set(self, name: str, **changes: Any) -> None:
        _, t = self.find(name)
        for key, value in changes.items():
            setattr(t, key, value)

    def write(self, root: Path) -> Path:
        root.mkdir(parents=True, exist_ok=True)
        (root / "config.json").write_text(json.dumps(self.config, indent=1))
        if self.hf_quant is not None:
            (root / "hf_quant_config.json").write_text(json.dumps(self.hf_quant, indent=1))
        names = [f"model-{i + 1:05d}-of-{len(self.shards):05d}.safetensors"
                 for i in range(len(self.shards))]  # fmt: skip
        weight_map: dict[str, str] = {}
        for file, tensors in zip(names, self.shards, strict=True):
            write_safetensors(root / file, tensors)
            weight_map.update(dict.fromkeys(tensors, file))
        index = {"metadata": {"total_size": 0}, "weight_map": weight_map}
        (root / "model.safetensors.index.json").write_text(json.dumps(index, indent=1))
        return root


def _fp4(prefix: str, n: int, k: int, fmt: str, w4a4: bool) -> Iterator[tuple[str, Tensor]]:
    names = ("weight", "weight_scale", "weight_scale_2", "input_scale")
    if fmt == CT:
        names = ("weight_packed", "weight_scale", "weight_global_scale", "input_global_scale")
    scalar = [] if fmt == MODELOPT else [1]
    yield f"{prefix}.{names[0]}", Tensor("U8", [n, k // 2])
    yield f"{prefix}.{names[1]}", Tensor("F8_E4M3", [n, k // 16])
    yield f"{prefix}.{names[2]}", Tensor("F32", scalar, 0.0025)
    if w4a4:
        yield f"{prefix}.{names[3]}", Tensor("F32", scalar, 0.05)


def moe_checkpoint(
    *,
    layers: int = 2,
    experts: int = 4,
    fmt: str = MODELOPT,
    w4a4: bool = True,
    shards: int = 2,
    hidden: int = 256,
    inter: int = 128,
    config_groups: dict[str, Any] | None = None,
    extra: Callable[[str], Iterator[tuple[str, Tensor]]] | None = None,
) -> Layout:
    """A Qwen3-MoE-shaped NVFP4 checkpoint: `layers` layers of attention and `experts` experts."""
    heads, kv, head_dim = 4, 2, 64
    config: dict[str, Any] = {
        "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe",
        "hidden_size": hidden, "intermediate_size": 4 * hidden, "moe_intermediate_size": inter,
        "num_hidden_layers": layers, "num_attention_heads": heads, "num_key_value_heads": kv,
        "head_dim": head_dim, "num_experts": experts, "num_experts_per_tok": 2,
        "hidden_act": "silu", "vocab_size": 1024, "torch_dtype": "bfloat16",
    }  # fmt: skip
    hf_quant = None
    if fmt == MODELOPT:
        algo = "NVFP4" if w4a4 or config_groups else "W4A16_NVFP4"
        q = {"quant_algo": algo, "kv_cache_quant_algo": None, "group_size": 16,
             "exclude_modules": ["lm_head"]}  # fmt: skip
        config["quantization_config"] = {"quant_method": "modelopt", **q}
        if config_groups is not None:
            config["quantization_config"]["config_groups"] = config_groups
    else:
        fp4 = {"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16,
               "symmetric": True, "dynamic": False}  # fmt: skip
        config["quantization_config"] = {
            "quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized",
            "config_groups": {"group_0": {"targets": ["Linear"], "weights": fp4,
                                          "input_activations": {**fp4, "dynamic": "local"}
                                          if w4a4 else None}},
            "ignore": ["lm_head"],
        }  # fmt: skip
    tensors: list[tuple[str, Tensor]] = [
        ("model.embed_tokens.weight", Tensor("BF16", [1024, hidden]))
    ]
    for i in range(layers):
        p = f"model.layers.{i}"
        tensors.append((f"{p}.input_layernorm.weight", Tensor("BF16", [hidden])))
        for proj, n, k in (
            ("q_proj", heads * head_dim, hidden),
            ("k_proj", kv * head_dim, hidden),
            ("v_proj", kv * head_dim, hidden),
            ("o_proj", hidden, heads * head_dim),
        ):
            tensors += _fp4(f"{p}.self_attn.{proj}", n, k, fmt, w4a4)
        tensors.append((f"{p}.mlp.gate.weight", Tensor("BF16", [experts, hidden])))
        for e in range(experts):
            q = f"{p}.mlp.experts.{e}"
            tensors += _fp4(f"{q}.gate_proj", inter, hidden, fmt, w4a4)
            tensors += _fp4(f"{q}.up_proj", inter, hidden, fmt, w4a4)
            tensors += _fp4(f"{q}.down_proj", hidden, inter, fmt, w4a4)
        if extra is not None:
            tensors += extra(p)
    tensors.append(("lm_head.weight", Tensor("BF16", [1024, hidden])))
    per = -(-len(tensors) // shards)
    return Layout(
        config, hf_quant, [dict(tensors[i : i + per]) for i in range(0, len(tensors), per)]
    )
