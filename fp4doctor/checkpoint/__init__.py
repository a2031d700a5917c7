"""The model a user serves, read from its checkpoint: format, layer classes and each rank's GEMMs.

    ckpt = checkpoint.load("nvidia/Llama-3.1-8B-Instruct-FP4")   # a directory or a cached repo id
    for gemm in ckpt.gemms(tp=8):
        print(gemm.layer.name, gemm.n, gemm.k)

Only `config.json`, `hf_quant_config.json`, the shard index and safetensors headers are read,
and of tensor data only the scalar scales (`weight_scale_2`, `input_scale`, ...: 4 bytes each).
The layer classes come from the shards holding the first layer of each kind; the content
(fp4doctor/checkpoint/content.py: each tensor the format needs, per layer class and per expert,
its dtype, the scalar scales' values) from every shard's header, up to MAX_CONTENT_HEADER_BYTES
in all. Torch-free and offline unless `hub=True` (docs/models.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from fp4doctor.checkpoint.activation import MoeActivation, read_activation
from fp4doctor.checkpoint.content import DTYPE, NOT_READ, Content, Defect, inspect
from fp4doctor.checkpoint.errors import CheckpointError
from fp4doctor.checkpoint.files import boundary, inside, is_regular, shard
from fp4doctor.checkpoint.layers import LayerClass, Scan, layer_classes, modules, scan
from fp4doctor.checkpoint.parallel import RankGemm, per_rank
from fp4doctor.checkpoint.quant import QuantConfig, read_quant
from fp4doctor.checkpoint.safetensors import (
    INDEX_NAME,
    Scalars,
    TensorInfo,
    read_header_sized,
    read_index,
    read_scalars,
)
from fp4doctor.checkpoint.source import Remote, load_json, locate

__all__ = ["Checkpoint", "CheckpointError", "LayerClass", "MoeActivation", "RankGemm", "load"]

# The headers read for the content, in all: DeepSeek-R1's 163 shards hold about 30 MB of them.
MAX_CONTENT_HEADER_BYTES = 256_000_000


@dataclass(frozen=True)
class Checkpoint:
    """What fp4doctor knows of a model: where it is, its format and its layer classes."""

    name: str  # as the user gave it
    where: str  # the directory read, or hub:ORG/NAME
    config: Mapping[str, Any]
    quant: QuantConfig
    layers: tuple[LayerClass, ...]
    shards: int
    headers_read: int  # the shard headers read for the layer classes
    content: Content = field(default_factory=Content)

    @property
    def architecture(self) -> str:
        archs = self.config.get("architectures")
        if isinstance(archs, list) and archs:
            return str(archs[0])
        return str(self.config.get("model_type", "unknown"))

    def architectures(self) -> tuple[str, ...]:
        """Every architecture config.json names, else its model_type."""
        archs = self.config.get("architectures")
        if isinstance(archs, list) and archs:
            return tuple(str(a) for a in archs)
        return (str(self.config.get("model_type", "unknown")),)

    def experts(self) -> int | None:
        """The routed experts of the MoE layers, or None for a dense model."""
        counts = [layer.experts for layer in self.layers if layer.experts]
        return max(counts) if counts else None

    def families(self) -> list[str]:
        """The FP4 GEMM families (linear, moe) the model's NVFP4 layers use."""
        return sorted({layer.family for layer in self.layers if layer.fp4})

    @property
    def moe_activation(self) -> MoeActivation | None:
        """The activation the NVFP4 experts run (config.json), None without NVFP4 experts."""
        experts = next((c for c in self.layers if c.fp4 and c.name == "experts.gate_up"), None)
        if experts is None:
            return None
        return read_activation(self.config, experts.gated)

    def gemms(self, tp: int = 1, ep: int = 1) -> list[RankGemm]:
        """Each layer class's GEMM on one rank at this parallel size."""
        return [per_rank(layer, self.config, tp, ep) for layer in self.layers]

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "where": self.where,
            "architecture": self.architecture,
            "format": self.quant.format,
            "format_label": self.quant.label,
            "quant_config_file": self.quant.file,
            "excluded": list(self.quant.excluded),
            "shards": self.shards,
            "headers_read": self.headers_read,
        } | ({"moe_activation": act.to_dict()} if (act := self.moe_activation) else {})


def load(model: str, *, hub: bool = False) -> Checkpoint:
    """Read `model` (a directory, or an ORG/NAME in the Hugging Face cache; the Hub only with
    `hub`). Raises CheckpointError naming the file and key for a missing, partial or non-NVFP4
    checkpoint."""
    found = locate(model, hub=hub)
    if isinstance(found, Remote):
        return _from_remote(model, found)
    return _from_directory(model, found)


def _from_directory(model: str, root: Path) -> Checkpoint:
    within = boundary(root)  # every file read resolves inside it (checkpoint/files.py)
    config_file = inside(root / "config.json", within)
    if not is_regular(config_file):
        raise CheckpointError(f"{config_file}: missing; not a Hugging Face checkpoint directory")
    config = load_json(config_file)
    if not isinstance(config, dict):
        raise CheckpointError(f"{config_file}: not a JSON object")
    hf_file = inside(root / "hf_quant_config.json", within)
    hf_quant = load_json(hf_file) if is_regular(hf_file) else None
    quant = read_quant(config, str(config_file), hf_quant, str(hf_file))
    index_file = inside(root / INDEX_NAME, within)
    if is_regular(index_file):
        weight_map = read_index(index_file)
        shards = sorted(set(weight_map.values()))
        paths = {s: shard(root, s, within, index_file) for s in shards}  # before any is opened
        # The shards that hold the first module group of each layer class (q, k and v of the
        # first layer; gate and up of its first expert), scales included: enough to know every
        # class's shapes and formats without opening the rest.
        found = scan(weight_map.items())
        wanted = sorted(found.files)
        missing = [s for s in shards if not is_regular(paths[s])]
        if missing:
            raise CheckpointError(
                f"{index_file}: 'weight_map' names {len(missing)} shard(s) that are not in "
                f"{root} (first: {missing[0]}): a partial download?"
            )
        headers: dict[Path, tuple[dict[str, TensorInfo], int]] = {}
        tensors: dict[str, TensorInfo] = {}
        for name in wanted:
            headers[paths[name]] = read_header_sized(paths[name])
            tensors.update(headers[paths[name]][0])
        read = len(wanted)
        names: list[str] = list(weight_map)
        content_files = [paths[s] for s in shards]
    else:
        files = [inside(f, within) for f in sorted(root.glob("*.safetensors"))]
        if not files:
            raise CheckpointError(
                f"{root}: no *.safetensors file and no {INDEX_NAME}: a partial download, or "
                "weights in another format"
            )
        headers = {f: read_header_sized(f) for f in files}
        tensors = {n: t for f in files for n, t in headers[f][0].items()}
        found = scan((name, "") for name in tensors)
        shards, read = [f.name for f in files], len(files)
        names, content_files = list(tensors), files
    content = _read_content(names, content_files, headers, quant)
    return _build(model, str(root), config, quant, tensors, found, len(shards), read, content)


def _read_content(
    names: list[str],
    files: list[Path],
    headers: dict[Path, tuple[dict[str, TensorInfo], int]],
    quant: QuantConfig,
) -> Content:
    """Every shard's header (those already read kept), up to MAX_CONTENT_HEADER_BYTES in all,
    and the scalar scales' values; the content's defects."""
    infos: dict[str, TensorInfo] = {}
    values: dict[str, tuple[float, ...]] = {}
    beyond: list[str] = []
    header_bytes = opened = scalar_bytes = 0
    skipped: list[Path] = []
    header_only = False
    for path in files:
        if path not in headers and header_bytes > MAX_CONTENT_HEADER_BYTES:
            skipped.append(path)
            continue
        found, size = headers.get(path) or read_header_sized(path)
        opened += 1
        header_bytes += size
        infos.update(found)
        got: Scalars = read_scalars(path, found.values())
        values.update(got.values)
        beyond += got.beyond
        scalar_bytes += got.bytes_read
        header_only = header_only or got.header_only
    defects, modules = inspect(names, infos, values, quant, beyond)
    if skipped:
        defects.append(
            Defect(NOT_READ, "", "", (), len(skipped), tuple(p.name for p in skipped[:3]),
                   detail=f"headers over {MAX_CONTENT_HEADER_BYTES} bytes in all")
        )  # fmt: skip
    how = "read" if values or not header_only else "not read: header-only files (no tensor data)"
    return Content(tuple(defects), modules, len(values), scalar_bytes, opened, header_bytes, how)


def _from_remote(model: str, remote: Remote) -> Checkpoint:
    where = f"hub:{remote.repo_id}"
    config = remote.json_files.get("config.json")
    if not isinstance(config, dict):
        raise CheckpointError(f"{where}/config.json: missing or not a JSON object")
    hf_quant = remote.json_files.get("hf_quant_config.json")
    quant = read_quant(config, f"{where}/config.json", hf_quant, f"{where}/hf_quant_config.json")
    tensors = dict(remote.tensors)
    found = scan((name, "") for name in tensors)
    defects, modules = inspect(tensors, tensors, {}, quant)
    content = Content(tuple(defects), modules, values="not read: headers from the Hub only")
    return _build(model, where, config, quant, tensors, found, 0, 0, content)


def _build(
    model: str,
    where: str,
    config: Mapping[str, Any],
    quant: QuantConfig,
    tensors: Mapping[str, TensorInfo],
    found: Scan,
    shards: int,
    read: int,
    content: Content,
) -> Checkpoint:
    classes = layer_classes(modules(tensors), found)
    # A truncated or partly read checkpoint may hold fewer experts than the model has.
    experts = _config_int(
        config, "n_routed_experts", "num_experts", "num_local_experts", "moe_num_experts"
    )
    if experts:
        classes = [replace(c, experts=experts) if c.experts else c for c in classes]
    if not any(c.fp4 for c in classes):
        # The declared format, contradicted by every weight: a finding of the content (what
        # the engines do with it is in profiles/shapes.yaml `content`), not a usage error.
        dtypes = sorted({t.dtype for n, t in tensors.items() if n.endswith(".weight")})
        gemm = [c for c in classes if not c.fp4]
        content = replace(content, defects=(*content.defects, Defect(
            DTYPE, "", "", ("weight",), sum(c.count for c in gemm),
            tuple(c.example + ".weight" for c in gemm[:3]),
            detail=f"no NVFP4 weight (uint8 'weight' or 'weight_packed' with an F8_E4M3 "
            f"'weight_scale') though {quant.file} says {quant.label}; weights stored as "
            f"{', '.join(dtypes) or 'nothing'}",
        )))  # fmt: skip
    return Checkpoint(model, where, config, quant, tuple(classes), shards, read, content)


def _config_int(config: Mapping[str, Any], *keys: str) -> int:
    """The first of `keys` set to a whole number in config.json (or its text_config)."""
    sections = [config]
    if isinstance(config.get("text_config"), dict):
        sections.append(config["text_config"])
    for section in sections:
        for key in keys:
            value = section.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
    return 0
