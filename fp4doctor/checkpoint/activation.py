"""The MoE activation a model's experts run, and the SwiGLU clamp, read from config.json.

The fused-MoE backends support only some activations (and only some apply a SwiGLU clamp), so
the activation decides which of them can run the model (profiles/shapes.yaml `activations`).
Names are vLLM's `MoEActivation` values (vllm/model_executor/layers/fused_moe/activation.py):
gated `silu`, `gelu`, `gelu_tanh`, `swigluoai`, `swigluoai_uninterleave`, `swiglustep`; non-gated
`silu_no_mul`, `gelu_no_mul`, `gelu_tanh_no_mul`, `relu2_no_mul`.

How a config becomes an activation is the model code's (vLLM wheel 0.24.0):
- MiniMax-M3 (`MiniMaxM3*` architectures; vllm/models/minimax_m3/nvidia/model.py
  MiniMaxM3MoE): `activation="swigluoai_uninterleave"`, `swiglu_limit=config.swiglu_limit`;
- Step-3.5 / Step-3.7 (vllm/model_executor/models/step3p5.py Step3p5MoEBlock): a layer whose
  `swiglu_limits[layer]` is set and not 0 runs `swiglustep` (vLLM asserts the limit is 7.0),
  the others `silu`;
- a `swiglu_limit` number (DeepSeek-V4: vllm/models/deepseek_v4/nvidia/model.py passes
  `swiglu_limit=self.swiglu_limit` to FusedMoE) is a clamp on the gated activation;
- otherwise the config's activation name (`moe_hidden_act`, `hidden_act`, `mlp_hidden_act`),
  gated when the experts store a gate projection beside the up one.
An activation name fp4doctor does not know is kept as written (`name` None): said, not guessed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

GATED = ("silu", "gelu", "gelu_tanh", "swigluoai", "swigluoai_uninterleave", "swiglustep")
NON_GATED = ("silu_no_mul", "gelu_no_mul", "gelu_tanh_no_mul", "relu2_no_mul")
ACTIVATIONS = GATED + NON_GATED

# config.json activation names (transformers ACT2FN keys) -> the gated MoE activation.
_HF_NAMES = {
    "silu": "silu",
    "swish": "silu",
    "gelu": "gelu",
    "gelu_pytorch_tanh": "gelu_tanh",
    "gelu_new": "gelu_tanh",
    "gelu_tanh": "gelu_tanh",
    "relu2": "relu2",  # only non-gated (relu2_no_mul) exists among the MoE activations
}
_ACT_KEYS = ("moe_hidden_act", "hidden_act", "mlp_hidden_act")


@dataclass(frozen=True)
class MoeActivation:
    """The experts' activation as the engine will run it, and where it was read."""

    name: str | None  # one of ACTIVATIONS; None: the config's value is not one fp4doctor knows
    key: str  # the config.json key that decided it ("architectures", "swiglu_limits", ...)
    value: str  # that key's value, as written (shortened)
    swiglu_limit: float | None = None  # a SwiGLU clamp the engine applies (config `swiglu_limit`)
    layers: tuple[int, ...] = ()  # swiglustep: the layers that run it (the others run silu)

    @property
    def known(self) -> bool:
        return self.name is not None

    @property
    def label(self) -> str:
        """As vLLM's errors name it: MoEActivation.SWIGLUSTEP."""
        return f"MoEActivation.{self.name.upper()}" if self.name else repr(self.value)

    @property
    def gated(self) -> bool | None:
        return None if self.name is None else self.name in GATED

    def describe(self) -> str:
        """One phrase: the activation and the config key that says so."""
        what = self.label if self.known else "an activation fp4doctor does not know"
        text = f"{what} (config.json {self.key}: {self.value})"
        if self.swiglu_limit is not None:
            text += f", swiglu_limit={self.swiglu_limit:g}"
        return text

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name, "key": self.key, "value": self.value}
        if self.swiglu_limit is not None:
            data["swiglu_limit"] = self.swiglu_limit
        if self.layers:
            data["layers"] = list(self.layers)
        return data


def read_activation(config: Mapping[str, Any], gated: bool) -> MoeActivation:
    """The MoE activation `config` (config.json, its text_config merged over it) asks for.
    `gated`: the experts store a gate projection (gate and up fused) rather than up alone."""
    c = dict(config)
    if isinstance(config.get("text_config"), dict):
        c.update(config["text_config"])
    limit = _number(c.get("swiglu_limit"))
    archs = [str(a) for a in c.get("architectures") or config.get("architectures") or []]
    minimax = next((a for a in archs if a.startswith("MiniMaxM3")), None)
    if minimax:
        return MoeActivation("swigluoai_uninterleave", "architectures", minimax, limit)
    limits = c.get("swiglu_limits")
    if isinstance(limits, list):
        layers = tuple(i for i, v in enumerate(limits) if _number(v) not in (None, 0.0))
        if layers:
            shown = sorted({_number(limits[i]) or 0.0 for i in layers})
            value = f"{', '.join(f'{v:g}' for v in shown)} on {len(layers)} of {len(limits)} layers"
            return MoeActivation("swiglustep", "swiglu_limits", value, None, layers)
    for key in _ACT_KEYS:
        raw = c.get(key)
        if not isinstance(raw, str):
            continue
        base = _HF_NAMES.get(raw.lower())
        if base is None:
            return MoeActivation(None, key, raw[:60], limit)
        if base == "relu2":
            name = None if gated else "relu2_no_mul"
        else:
            name = base if gated else f"{base}_no_mul"
        return MoeActivation(name, key, raw, limit)
    return MoeActivation(None, "hidden_act", "(not set)", limit)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


__all__ = ["ACTIVATIONS", "GATED", "NON_GATED", "MoeActivation", "read_activation"]
