"""The checkpoint's quantisation format, from `hf_quant_config.json` or config.json's
`quantization_config`: which NVFP4 format it is, who wrote it, and what it leaves unquantised.

Formats, as the engines name them:
- ModelOpt (`quant_method: modelopt`, or the legacy `hf_quant_config.json`): `quant_algo` NVFP4
  (W4A4), W4A16_NVFP4 (weight-only) or MIXED_PRECISION (a per-layer algo in
  `quantized_layers`); unquantised modules in `exclude_modules` (or `ignore`)
  (vllm-project/vllm vllm/model_executor/layers/quantization/modelopt.py, LINEAR_ALGOS and
  ModelOptQuantConfigBase, wheel 0.33.0).
- compressed-tensors (`quant_method: compressed-tensors`): a config group whose weights are
  4-bit floats in groups of 16 (`nvfp4-pack-quantized`), with 4-bit input activations (W4A4) or
  none (W4A16); unquantised modules in `ignore` (vllm .../compressed_tensors/compressed_tensors.py
  `_is_nvfp4_format`, wheel 0.33.0).

A ModelOpt `quant_algo: NVFP4` config may also carry compressed-tensors style `config_groups`
whose every group has `input_activations: null`: weights only, though the algo says W4A4
(`weight_only_groups`). vLLM from 0.29.0 loads such a checkpoint as W4A16_NVFP4; before, and in
SGLang, it goes down the W4A4 path (profiles/shapes.yaml `content`, defect `weight_only_groups`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fp4doctor.checkpoint.errors import CheckpointError

MODELOPT_NVFP4 = "modelopt-nvfp4"
MODELOPT_W4A16 = "modelopt-w4a16"
MODELOPT_MIXED = "modelopt-mixed"
CT_NVFP4 = "ct-nvfp4"
CT_NVFP4A16 = "ct-nvfp4a16"
FORMATS = (MODELOPT_NVFP4, MODELOPT_W4A16, MODELOPT_MIXED, CT_NVFP4, CT_NVFP4A16)

_MODELOPT_ALGOS = {
    "NVFP4": MODELOPT_NVFP4,
    "W4A16_NVFP4": MODELOPT_W4A16,
    "MIXED_PRECISION": MODELOPT_MIXED,
}


@dataclass(frozen=True)
class QuantConfig:
    """The format, the file it was read from, and the modules it keeps unquantised."""

    format: str  # one of FORMATS
    file: str
    excluded: tuple[str, ...] = ()
    producer: str | None = None
    # quant_algo NVFP4 whose config_groups all have input_activations null (weights only).
    weight_only_groups: bool = False

    @property
    def label(self) -> str:
        return {
            MODELOPT_NVFP4: "ModelOpt NVFP4 (W4A4)",
            MODELOPT_W4A16: "ModelOpt W4A16_NVFP4 (weight-only)",
            MODELOPT_MIXED: "ModelOpt MIXED_PRECISION",
            CT_NVFP4: "compressed-tensors nvfp4-pack-quantized (W4A4)",
            CT_NVFP4A16: "compressed-tensors nvfp4-pack-quantized (W4A16, weight-only)",
        }[self.format]


def read_quant(
    config: Mapping[str, Any], config_file: str, hf_quant: Any, hf_file: str
) -> QuantConfig:
    """The NVFP4 format of a checkpoint, or a CheckpointError naming the file and the key."""
    if hf_quant is not None:
        if not isinstance(hf_quant, dict) or not isinstance(hf_quant.get("quantization"), dict):
            raise CheckpointError(f"{hf_file}: key 'quantization' is missing or not an object")
        producer = hf_quant.get("producer")
        name = producer.get("name") if isinstance(producer, dict) else None
        return _modelopt(hf_quant["quantization"], hf_file, "quantization", name, hf_quant)
    qc = config.get("quantization_config")
    if qc is None:
        raise CheckpointError(
            f"{config_file}: no 'quantization_config' (and no hf_quant_config.json beside it): "
            "not an NVFP4 checkpoint"
        )
    if not isinstance(qc, dict):
        raise CheckpointError(f"{config_file}: 'quantization_config' is not an object")
    method = qc.get("quant_method")
    if method in ("modelopt", "modelopt_fp4"):
        return _modelopt(qc, config_file, "quantization_config", "modelopt", qc)
    if method == "compressed-tensors":
        return _compressed_tensors(qc, config_file)
    raise CheckpointError(
        f"{config_file}: 'quantization_config.quant_method' is {method!r}, not an NVFP4 format "
        "(fp4doctor reads: modelopt, compressed-tensors)"
    )


def _modelopt(
    q: Mapping[str, Any], file: str, key: str, producer: str | None, whole: Mapping[str, Any]
) -> QuantConfig:
    algo = q.get("quant_algo")
    fmt = _MODELOPT_ALGOS.get(str(algo).upper()) if algo is not None else None
    if fmt is None:
        raise CheckpointError(
            f"{file}: '{key}.quant_algo' is {algo!r}, not an NVFP4 format "
            f"(valid: {', '.join(_MODELOPT_ALGOS)})"
        )
    excluded = q.get("exclude_modules", q.get("ignore", [])) or []
    if not isinstance(excluded, list) or not all(isinstance(e, str) for e in excluded):
        raise CheckpointError(f"{file}: '{key}.exclude_modules' is not a list of module names")
    if fmt == MODELOPT_MIXED:
        layers = q.get("quantized_layers")
        if not isinstance(layers, dict) or not layers:
            raise CheckpointError(
                f"{file}: '{key}.quantized_layers' is missing: MIXED_PRECISION names each "
                "layer's algo there"
            )
        algos = {
            str(v.get("quant_algo", "")).upper() for v in layers.values() if isinstance(v, dict)
        }
        if not algos & {"NVFP4", "W4A16_NVFP4"}:
            raise CheckpointError(
                f"{file}: '{key}.quantized_layers' has no NVFP4 layer (algos: "
                f"{', '.join(sorted(algos)) or 'none'})"
            )
    return QuantConfig(fmt, file, tuple(excluded), producer, _weight_only_groups(fmt, whole))


def _weight_only_groups(fmt: str, whole: Mapping[str, Any]) -> bool:
    """vLLM's test, on the config it was given (`original_config`): quant_algo NVFP4 and every
    config group's `input_activations` null (vllm-project/vllm vllm/model_executor/layers/
    quantization/modelopt.py ModelOptNvFp4Config._from_config, wheels 0.29.0-0.34.0)."""
    groups = whole.get("config_groups")
    return (
        fmt == MODELOPT_NVFP4
        and isinstance(groups, dict)
        and bool(groups)
        and all(isinstance(g, dict) and g.get("input_activations") is None for g in groups.values())
    )


def _is_fp4(args: Any) -> bool:
    return (
        isinstance(args, dict)
        and args.get("num_bits") == 4
        and args.get("type") == "float"
        and args.get("group_size") == 16
    )


def _compressed_tensors(qc: Mapping[str, Any], file: str) -> QuantConfig:
    groups = qc.get("config_groups")
    if not isinstance(groups, dict) or not groups:
        raise CheckpointError(f"{file}: 'quantization_config.config_groups' is missing or empty")
    schemes = set()
    for name, group in groups.items():
        if not isinstance(group, dict):
            raise CheckpointError(
                f"{file}: 'quantization_config.config_groups.{name}' is not an object"
            )
        if _is_fp4(group.get("weights")):
            schemes.add("W4A4" if _is_fp4(group.get("input_activations")) else "W4A16")
    if not schemes:
        raise CheckpointError(
            f"{file}: 'quantization_config.config_groups' has no NVFP4 group (weights num_bits 4, "
            "type float, group_size 16): not an NVFP4 checkpoint"
        )
    ignore = qc.get("ignore", []) or []
    if not isinstance(ignore, list) or not all(isinstance(e, str) for e in ignore):
        raise CheckpointError(f"{file}: 'quantization_config.ignore' is not a list of module names")
    fmt = CT_NVFP4 if "W4A4" in schemes else CT_NVFP4A16
    return QuantConfig(fmt, file, tuple(ignore), "compressed-tensors")
