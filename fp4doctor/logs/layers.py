"""Per layer class, what really ran: vLLM's module tree (``VLLM_LOG_MODEL_INSPECTION=1``), its
NVFP4 GEMM line, its MoE backend line and the backends it skipped (DEBUG), or SGLang's resolved
server arguments, joined into one row per layer class: the quant scheme, the kernel, why the
others were skipped.

The tree is vLLM's `format_model_inspection` (vllm/model_inspection.py, the same in 0.18-0.34),
logged by `log_model_inspection` (model_executor/model_loader/base_loader.py) as
``vLLM model structure:`` and then one line per module, each with the logger's header:

    Qwen3MoeForCausalLM()(
      (model): Qwen3MoeModel()(
        (layers): ModuleList()(
          (0-47): 48 x Qwen3MoeDecoderLayer()(
            (self_attn): Qwen3MoeAttention()(
              (qkv_proj): QKVParallelLinear(quant=ModelOptLinearMethod, in_features=2048, ...)
            (mlp): Qwen3MoeSparseMoeBlock()(
              (experts): MoERunner()(
                (routed_experts): RoutedExperts(quant=ModelOptNvFp4FusedMoE, )

vLLM picks one NVFP4 linear kernel for the whole model and one MoE backend (the engine's own
code logs each once), so every NVFP4 layer of a family runs the kernel its family's line names.
The module names give the layer class as the checkpoint reader names it
(fp4doctor.checkpoint.layers.classify: qkv, o, gate_up, down, experts, ...).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from fp4doctor.checkpoint.layers import classify

if TYPE_CHECKING:
    from fp4doctor.oracle.startup_log import Ran

HEADER = "vLLM model structure:"
MAX_MODULES = 10_000  # quantized modules kept of one tree (vLLM collapses repeated layers)
_TREE = re.compile(
    r"(?P<indent> {0,400})(?:\((?P<name>[^()]{1,200})\): )?(?:(?P<n>\d{1,7}) x )?"
    r"(?P<cls>[A-Za-z_]\w{0,100})\((?P<rest>.{0,4000})$"
)
_CLOSE = re.compile(r" {0,400}\)$")
_QUANT = re.compile(r"quant=(\w{1,100})")
_REFUSED = re.compile(
    r"MoE (?:LoRA )?backend '(\w{1,100})' does not support the deployment configuration"
    r"(?: since (.{0,500}?))?\.?$"
)
REFUSED_GUARD = "does not support the deployment configuration"
# The engines' MoE modules: their quant method runs the experts (vLLM 0.18-0.24 FusedMoE,
# 0.33-0.34 RoutedExperts under a MoERunner).
_MOE_MODULES = ("FusedMoE", "SharedFusedMoE", "RoutedExperts", "MoERunner")
# vLLM 0.33-0.34's ModelOpt linear method serves every ModelOpt format (FP8, NVFP4, MXFP8): the
# tree does not say which; the NVFP4 GEMM line says an NVFP4 kernel was built.
_GENERIC = ("ModelOptLinearMethod",)


@dataclass
class Module:
    path: str  # with '*' for the collapsed layer indices
    cls: str  # the module's class: QKVParallelLinear, RoutedExperts
    scheme: str  # its quant method (or compressed-tensors scheme) class
    count: int  # how many modules the line stands for (the "N x" groups above it)
    line: int


@dataclass
class Tree:
    """The module tree of one ``vLLM model structure:`` message, read line by line."""

    first: int
    modules: list[Module] = field(default_factory=list)
    done: bool = False
    _stack: list[tuple[int, str, int]] = field(default_factory=list)  # indent, name, count

    def feed(self, text: str, number: int) -> None:
        if self.done:
            return
        if _CLOSE.fullmatch(text):
            indent = len(text) - len(text.lstrip(" "))
            while self._stack and self._stack[-1][0] >= indent:
                self._stack.pop()
            if indent == 0:
                self.done = True
            return
        m = _TREE.match(text)
        if m is None:
            self.done = True  # the message ended without its closing line (a cut paste)
            return
        indent = len(m["indent"])
        while self._stack and self._stack[-1][0] >= indent:
            self._stack.pop()
        name = m["name"] or ""
        if name and not name.isidentifier():  # "0-27, 29-47" or "5": layers collapsed
            name = "*"
        count = int(m["n"]) if m["n"] else 1
        parent = self._stack[-1][2] if self._stack else 1
        path = ".".join([n for _, n, _ in self._stack if n] + ([name] if name else []))
        rest = m["rest"]
        if len(self.modules) >= MAX_MODULES:
            self.done = True
            return
        if "quant=" in rest and (q := _QUANT.search(rest)):
            self.modules.append(Module(path, m["cls"], q.group(1), parent * count, number))
        if rest.endswith("("):
            self._stack.append((indent, name, parent * count))


@dataclass(frozen=True)
class Row:
    layer: str  # the layer class: qkv, o, gate_up, down, experts, lm_head, or the module name
    family: str  # linear | moe
    scheme: str  # the engine's word for its quantization
    modules: int
    kernel: str | None  # the engine's word for what ran it; None: not an NVFP4 layer, or unknown
    backend: str | None  # fp4doctor's name for it
    skipped: tuple[tuple[str, str], ...] = ()  # (backend, reason) the engine passed over
    note: str | None = None


def layer_class(m: Module) -> tuple[str, str]:
    """(layer class, family) of a module of the tree."""
    found = classify(m.path.replace("*", "0"))
    if m.cls in _MOE_MODULES or "moe" in m.scheme.lower():
        return "experts", "moe"
    if found is None:
        return m.path.rsplit(".", 1)[-1] or m.cls, "linear"
    cls, _, expert = found
    return cls, "moe" if expert else "linear"


def is_fp4(scheme: str) -> bool:
    return "fp4" in scheme.lower()


def refusal(text: str) -> tuple[str, str] | None:
    """(backend, reason) of the MoE oracle's 'does not support' line."""
    if REFUSED_GUARD not in text:
        return None
    m = _REFUSED.search(text)
    return (m.group(1), m.group(2) or "no reason given") if m else None


def rows(
    tree: Tree | None,
    ran: list[Ran],
    refused: list[tuple[str, str]],
    sglang: dict[str, str],
) -> list[Row]:
    """One row per layer class: from vLLM's tree where the log has one, else from SGLang's
    server arguments (one row per family: SGLang logs no module tree)."""
    from fp4doctor.oracle.startup_log import backend_of

    last = {(r.engine, r.family): r for r in ran}
    if tree is not None and tree.modules:
        out: dict[str, Row] = {}
        for m in tree.modules:
            name, family = layer_class(m)
            r = last.get(("vllm", family))
            fp4 = is_fp4(m.scheme) or (m.scheme in _GENERIC and r is not None)
            note = None
            if m.scheme in _GENERIC and fp4:
                note = (
                    f"{m.scheme} serves every ModelOpt format; the NVFP4 GEMM line names the kernel"
                )
            kernel = r.engine_name if (fp4 and r is not None) else None
            backend = backend_of(r) if (fp4 and r is not None) else None
            skipped = tuple(refused) if (family == "moe" and kernel is not None) else ()
            if name in out:
                prev = out[name]
                out[name] = Row(prev.layer, prev.family, prev.scheme, prev.modules + m.count,
                                prev.kernel, prev.backend, prev.skipped, prev.note)  # fmt: skip
                continue
            out[name] = Row(name, family, m.scheme, m.count, kernel, backend, skipped, note)
        return list(out.values())
    if sglang:
        scheme = sglang.get("quantization") or "the checkpoint's"
        result = []
        for family, key in (("linear", "fp4_gemm_runner_backend"), ("moe", "moe_runner_backend")):
            if key in sglang:
                result.append(Row(f"all {family} layers", family, scheme, 0, sglang[key], None))
        return result
    return []
