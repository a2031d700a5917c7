"""Extract vLLM's NVFP4 knobs, kernel orders and compute-capability gates from every release.

Run from the repository root: ``python3 tools/extract/vllm.py`` (``--only 0.30.0`` to print one
release; ``--jobs N`` for parallel wheel reads). For every vLLM release on PyPI that has a wheel
and ships NVFP4 code, the program reads only the Python members it needs out of the wheel (HTTP
range requests through ``wheels.py``), parses them with ``ast`` and writes
``tools/extract/data/vllm.json``. Nothing is guessed: where the program cannot tell, it writes
null and an ``"unverified"`` note. Maintainer tooling: not part of the installed package.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import re
import sys
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from packaging.version import Version
from wheels import Release, Wheel, releases

PROJECT = "vllm"
OUT = Path(__file__).resolve().parent / "data" / "vllm.json"
# Compute capabilities each gate is evaluated at (SM75 ... SM121): every CUDA GPU CC from Turing
# on, each member of a family gate included (is_device_capability_family(100) is major 10: 10.0,
# 10.3 and 10.7; family 120: 12.0 and 12.1), so a gate written for a family is never read as a
# list of the members someone remembered.
CCS = (75, 80, 86, 89, 90, 100, 103, 107, 110, 120, 121)

# Wheel members worth reading: NVFP4/FP4 code, the knob definitions, FlashInfer glue, MoE oracles.
MEMBER_RE = re.compile(
    r"^vllm/("
    r"envs\.py|config/kernel\.py|engine/arg_utils\.py|utils/flashinfer\.py|"
    r"platforms/interface\.py|"
    r"model_executor/kernels/linear/__init__\.py|"
    r"model_executor/kernels/linear/nvfp4/[^/]+\.py|"
    r"model_executor/layers/quantization/modelopt\.py|"
    r"model_executor/layers/quantization/utils/([^/]*(fp4|flashinfer_utils)[^/]*|quant_utils|humming|humming/priority)\.py|"
    r"model_executor/layers/quantization/compressed_tensors/[^/]*compressed_tensors_moe[^/]*\.py|"
    r"model_executor/layers/quantization/compressed_tensors/compressed_tensors_moe/"
    r"[^/]*nvfp4[^/]*\.py|"
    r"model_executor/layers/quantization/compressed_tensors/schemes/[^/]*nvfp4[^/]*\.py|"
    r"model_executor/layers/fused_moe/oracle/(nvfp4|base|__init__)\.py|"
    r"model_executor/layers/fused_moe/[^/]*(flashinfer|cutlass_moe|marlin|fp4|cutedsl|b12x)"
    r"[^/]*\.py|"
    r"model_executor/layers/fused_moe/experts/[^/]*\.py"
    r")$"
)
# Large members never searched for helper definitions (keeps parsing cheap).
NO_DEFS = {"vllm/envs.py", "vllm/engine/arg_utils.py", "vllm/platforms/interface.py"}
MARKER = "NvFp4"  # first release whose modelopt.py defines ModelOptNvFp4* is the first NVFP4 one
MODELOPT = "vllm/model_executor/layers/quantization/modelopt.py"
FP4_ENV_RE = re.compile(
    r"FP4|FBGEMM|NVFP4|FLASHINFER_MOE|HAS_FLASHINFER_CUBIN|BATCH_INVARIANT|DISABLED_KERNELS|"
    r"B12X|HUMMING|MARLIN"
)
CAP_FUNCS = {"has_device_capability", "is_device_capability", "is_device_capability_family"}
PLATFORM_TRUE = {"is_cuda", "is_cuda_alike"}
PLATFORM_FALSE = {"is_rocm", "is_xpu", "is_cpu", "is_tpu", "is_out_of_tree"}
SELECT_TARGETS = {"backend", "self.backend", "force_kernel", "self.use_marlin", "use_marlin"}


def sha(text: str) -> str:
    """Short content hash used to notice when a function's source changes."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# --------------------------------------------------------------------------------------------
# Reading a release


@dataclass
class Source:
    """The parsed members of one release."""

    release: Release
    texts: dict[str, str] = field(default_factory=dict)
    trees: dict[str, ast.Module] = field(default_factory=dict)
    _defs: dict[str, list[tuple[str, ast.AST]]] = field(default_factory=dict)
    helpers: dict[str, ast.FunctionDef | None] = field(default_factory=dict)
    consts: dict[str, Any] = field(default_factory=dict)

    def tree(self, member: str) -> ast.Module | None:
        if member not in self.texts:
            return None
        if member not in self.trees:
            self.trees[member] = ast.parse(self.texts[member])
        return self.trees[member]

    def const(self, name: str) -> Any:
        """A module-level literal constant `name` (one value across the members read)."""
        if name not in self.consts:
            vals = set()
            for member in sorted(self.texts):
                if member in NO_DEFS:
                    continue
                tree = self.tree(member)
                assert tree is not None
                for node in tree.body:
                    tgt = node.targets if isinstance(node, ast.Assign) else []
                    if isinstance(node, ast.AnnAssign):
                        tgt = [node.target]
                    if any(isinstance(t, ast.Name) and t.id == name for t in tgt):
                        val = node.value
                        wrap = None
                        if (
                            isinstance(val, ast.Call)
                            and call_name(val) in ("frozenset", "set", "tuple")
                            and len(val.args) == 1
                        ):
                            wrap, val = call_name(val), val.args[0]
                        try:
                            v = ast.literal_eval(val)  # type: ignore[arg-type]
                            v = tuple(sorted(v)) if wrap else v
                        except (ValueError, SyntaxError, TypeError):
                            v = None
                        vals.add(repr(v))
            one = next(iter(vals)) if len(vals) == 1 else "None"
            self.consts[name] = ast.literal_eval(one) if one != "None" else None
        return self.consts[name]

    def find(self, suffix: str) -> str | None:
        """The read member ending with `suffix`, if exactly one does."""
        hits = sorted(m for m in self.texts if m.endswith(suffix))
        return hits[0] if len(hits) == 1 else None

    def defs(self, name: str) -> list[tuple[str, ast.AST]]:
        """Every top-level or class-level def/class called `name`, with its member path."""
        if name in self._defs:
            return self._defs[name]
        out = []
        for member in sorted(self.texts):
            if member in NO_DEFS:
                continue
            tree = self.tree(member)
            assert tree is not None
            for node in iter_defs(tree):
                if getattr(node, "name", None) == name:
                    out.append((member, node))
        self._defs[name] = out
        return out


def iter_defs(tree: ast.Module) -> Iterator[ast.AST]:
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield node
        if isinstance(node, ast.ClassDef):
            for sub in node.body:
                if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    yield sub


def load(release: Release, tries: int = 4) -> Source:
    """Read the wanted members of one release's wheel (cached on disk by wheels.py); transient
    network errors are retried."""
    for attempt in range(tries):
        try:
            wheel = Wheel(release)
            src = Source(release)
            for member in wheel.names():
                if MEMBER_RE.match(member):
                    text = wheel.text(member)
                    if text is not None:
                        src.texts[member] = text
            return src
        except OSError:
            if attempt == tries - 1:
                raise
            time.sleep(2**attempt)
    raise AssertionError("unreachable")


def flashinfer_pins(release: Release) -> list[str]:
    """The release's `Requires-Dist` lines for FlashInfer's packages (its METADATA): what
    `pip install vllm==X` asks the index for."""
    wheel = Wheel(release)
    member = next((m for m in wheel.names() if m.endswith(".dist-info/METADATA")), None)
    text = wheel.text(member) if member is not None else None
    lines = [
        line.split(":", 1)[1].strip()
        for line in (text or "").splitlines()
        if line.startswith("Requires-Dist:")
    ]
    return sorted(line for line in lines if re.match(r"flashinfer[-_]", line))


# The compiled ops the FP4 backends call, and which torch.ops namespace (which extension module)
# each is called through in vllm/_custom_ops.py: `_C` is vllm/_C.abi3.so (0.7-0.23) or
# vllm/_C_stable_libtorch.abi3.so (0.19+), `_moe_C` vllm/_moe_C*.so.
FP4_OPS = (
    "cutlass_scaled_fp4_mm",
    "cutlass_fp4_group_mm",
    "scaled_fp4_quant",
    "scaled_fp4_experts_quant",
    "marlin_gemm",
    "gptq_marlin_gemm",
    "moe_wna16_marlin_gemm",
)
LEGACY_C, STABLE_C = "vllm/_C.abi3.so", "vllm/_C_stable_libtorch.abi3.so"
EXTENSION_RE = re.compile(r"^vllm/_\w*C\w*\.(?:abi3|cpython-[^/]*)\.so$")


def extensions(release: Release) -> dict[str, Any]:
    """The release's compiled extension modules (the wheel's file list) and, per FP4 op, the
    torch.ops namespaces vllm/_custom_ops.py calls it through: which binary holds its kernel."""
    wheel = Wheel(release)
    modules = sorted(m for m in wheel.names() if EXTENSION_RE.match(m))
    text = wheel.text("vllm/_custom_ops.py") or ""
    ops = {
        op: sorted(set(re.findall(rf"torch\.ops\.(\w+)\.{op}\b", text)))
        for op in FP4_OPS
        if re.search(rf"torch\.ops\.\w+\.{op}\b", text)
    }
    out: dict[str, Any] = {"modules": modules, "ops": ops}
    if {LEGACY_C, STABLE_C} <= set(modules):
        # Both register the `_C` namespace (0.19-0.23): which one holds an op is read from the
        # stable-ABI module itself (1-48 MiB compressed; the legacy one is up to 180 MiB).
        binary = wheel.read(STABLE_C) or b""
        out["held_by_stable_libtorch"] = [
            op
            for op in FP4_OPS
            if re.search(rb"(?<![A-Za-z0-9_])" + op.encode() + rb"(?![A-Za-z0-9_])", binary)
        ]
    return out


def has_nvfp4(release: Release) -> bool:
    """Whether the release ships NVFP4 support (ModelOpt NVFP4 config in modelopt.py)."""
    text = Wheel(release).text(MODELOPT)
    return text is not None and MARKER in text


# --------------------------------------------------------------------------------------------
# Generic AST helpers


def dotted(node: ast.AST) -> str:
    return ast.unparse(node)


def call_name(node: ast.Call) -> str:
    f = node.func
    if isinstance(f, ast.Attribute):
        return f.attr
    if isinstance(f, ast.Name):
        return f.id
    return dotted(f)


def literal(node: ast.AST | None) -> Any:
    """The Python value of a literal node, or the marker string '<expr: ...>'."""
    if node is None:
        return None
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        return f"<expr: {dotted(node)}>"


def env_refs(node: ast.AST) -> list[str]:
    """`envs.VLLM_*` attributes and `"VLLM_*"` strings referenced under `node`, in order."""
    out: list[str] = []
    for n in ast.walk(node):
        name = None
        if (
            isinstance(n, ast.Attribute)
            and n.attr.startswith("VLLM_")
            and dotted(n.value) in ("envs", "vllm.envs")
        ):
            name = n.attr
        elif (
            isinstance(n, ast.Constant)
            and isinstance(n.value, str)
            and re.fullmatch(r"VLLM_[A-Z0-9_]+", n.value)
        ):
            name = n.value
        if name and name not in out:
            out.append(name)
    return out


def decision_paths(body: list[ast.stmt], targets: set[str]) -> list[dict[str, Any]]:
    """Flatten the if/elif/else tree of `body` into the conditions under which each selection
    (an assignment to one of `targets`, or a `return`/`raise`) happens, in source order."""
    out: list[dict[str, Any]] = []

    def walk(stmts: list[ast.stmt], conds: list[str]) -> None:
        for s in stmts:
            if isinstance(s, ast.If):
                test = dotted(s.test)
                walk(s.body, [*conds, test])
                walk(s.orelse, [*conds, f"not ({test})"])
            elif isinstance(s, (ast.Assign, ast.AnnAssign)):
                tgts = s.targets if isinstance(s, ast.Assign) else [s.target]
                for t in tgts:
                    if s.value is None:
                        continue
                    if dotted(t) in targets:
                        out.append({"when": conds, "set": dotted(t), "to": dotted(s.value)})
                    elif isinstance(t, ast.Tuple):
                        # `force_kernel, name = Kernel, "x"` (0.34): each element a selection.
                        values = s.value.elts if isinstance(s.value, ast.Tuple) else None
                        for i, e in enumerate(t.elts):
                            if dotted(e) not in targets:
                                continue
                            to = (
                                dotted(values[i])
                                if values is not None and len(values) == len(t.elts)
                                else f"{dotted(s.value)}[{i}]"
                            )
                            out.append({"when": conds, "set": dotted(e), "to": to})
            elif isinstance(s, ast.Return) and "return" in targets:
                out.append({"when": conds, "return": dotted(s.value) if s.value else None})
            elif isinstance(s, ast.Raise):
                out.append({"when": conds, "raise": dotted(s.exc) if s.exc else None})
            elif isinstance(s, (ast.Try, ast.With, ast.For)):
                walk(s.body, conds)

    walk(body, [])
    return out


def list_of_names(node: ast.AST) -> list[str] | None:
    if isinstance(node, (ast.List, ast.Tuple)):
        names = [dotted(e) for e in node.elts]
        return names
    return None


def dict_value(node: ast.AST, key_src: str) -> ast.AST | None:
    if isinstance(node, ast.Dict):
        for k, v in zip(node.keys, node.values, strict=False):
            if k is not None and dotted(k) == key_src:
                return v
    return None


def module_assign(tree: ast.Module, name: str) -> ast.AST | None:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(dotted(t) == name for t in node.targets):
            return node.value
        if isinstance(node, ast.AnnAssign) and dotted(node.target) == name:
            return node.value
    return None


def method(cls: ast.ClassDef, name: str) -> ast.FunctionDef | None:
    for node in cls.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    return None


# --------------------------------------------------------------------------------------------
# A small evaluator: which compute capabilities a gate function can accept


class Opaque:
    """An unknown value. `cc` is True when the unknown depends on the compute capability (a
    compiled op called with it, say), so a CC verdict built on it cannot be trusted."""

    def __init__(self, why: str, cc: bool) -> None:
        self.why, self.cc = why, cc

    def __repr__(self) -> str:
        return f"Opaque({self.why!r}, cc={self.cc})"


class CapObj:
    """The value of `current_platform.get_device_capability()`."""


class Unsupported(Exception):
    """The gate's code uses a construct the evaluator does not model."""


@dataclass
class Outcome:
    value: Any
    tainted: bool  # reached only by assuming an Opaque(cc=True) went one way
    unknowns: tuple[str, ...]


class GateEval:
    """Evaluate a gate (is_supported / _supports_current_device / helper) at one CC, on CUDA.

    Platform capability calls are modelled from vllm/platforms/interface.py: has_device_capability
    (>=), is_device_capability (==), is_device_capability_family (same major). Calls to other
    functions defined in the release (helpers) are evaluated recursively; anything else (package
    probes such as has_flashinfer(), hasattr(torch, ...)) is an unknown requirement that does not
    depend on the CC. A call that is passed the CC (a compiled op) is an opaque CC-dependent value.
    """

    def __init__(self, src: Source, cc: int, depth: int = 0) -> None:
        self.src, self.cc, self.depth = src, cc, depth

    def helper(self, name: str) -> ast.FunctionDef | None:
        cache = self.src.helpers
        if name not in cache:
            hits = [n for _, n in self.src.defs(name) if isinstance(n, ast.FunctionDef)]
            bodies = {ast.dump(h) for h in hits}
            cache[name] = hits[0] if len(bodies) == 1 else None
        return cache[name]

    def run_function(self, fn: ast.FunctionDef, args: dict[str, Any]) -> list[Outcome]:
        env: dict[str, Any] = {a.arg: None for a in fn.args.args + fn.args.kwonlyargs}
        env.update(args)
        return self.run(fn.body, env, False, ())

    def run(
        self, stmts: list[ast.stmt], env: dict[str, Any], tainted: bool, unk: tuple[str, ...]
    ) -> list[Outcome]:
        for i, s in enumerate(stmts):
            if isinstance(s, ast.Return):
                v = self.expr(s.value, env) if s.value is not None else None
                if isinstance(v, tuple) and v:
                    v = v[0]
                if isinstance(v, Opaque):
                    return [Outcome(v, tainted or v.cc, (*unk, v.why))]
                return [Outcome(v, tainted, unk)]
            if isinstance(s, ast.Raise):
                return [Outcome("raise", tainted, unk)]
            if isinstance(s, ast.If):
                t = self.truth(self.expr(s.test, env))
                rest = stmts[i + 1 :]
                if isinstance(t, Opaque):
                    a = self.run(s.body + rest, dict(env), tainted or t.cc, (*unk, t.why))
                    b = self.run(s.orelse + rest, dict(env), tainted or t.cc, (*unk, t.why))
                    return a + b
                return self.run((s.body if t else s.orelse) + rest, env, tainted, unk)
            if isinstance(s, ast.Assign):
                v = self.expr(s.value, env)
                for t in s.targets:
                    if isinstance(t, ast.Name):
                        env[t.id] = v
                    elif isinstance(t, ast.Tuple):
                        for e in t.elts:
                            if isinstance(e, ast.Name):
                                env[e.id] = Opaque(f"unpacked {dotted(s.value)}", False)
                continue
            if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name):
                env[s.target.id] = self.expr(s.value, env) if s.value else None
                continue
            if isinstance(s, (ast.Expr, ast.Import, ast.ImportFrom, ast.Pass, ast.Delete)):
                continue
            if isinstance(s, ast.Try):
                return self.run(s.body + stmts[i + 1 :], env, tainted, unk)
            raise Unsupported(type(s).__name__)
        return [Outcome(None, tainted, unk)]

    @staticmethod
    def truth(v: Any) -> Any:
        if isinstance(v, Opaque):
            return v
        if isinstance(v, CapObj):
            return True
        return bool(v)

    def expr(self, node: ast.AST | None, env: dict[str, Any]) -> Any:
        if node is None:
            return None
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Tuple):
            return tuple(self.expr(e, env) for e in node.elts)
        if isinstance(node, ast.Name):
            if node.id in env:
                return env[node.id]
            if node.id in ("True", "False", "None"):
                return {"True": True, "False": False, "None": None}[node.id]
            if node.id == "current_platform":
                return "current_platform"
            const = self.src.const(node.id)
            if const is not None:
                return const
            # An unresolved name might hold anything, the CC included: be conservative.
            return Opaque(f"name {node.id}", True)
        if isinstance(node, ast.BoolOp):
            vals = [self.truth(self.expr(v, env)) for v in node.values]
            want = isinstance(node.op, ast.Or)
            if any(v is want for v in vals):
                return want
            ops = [v for v in vals if isinstance(v, Opaque)]
            if ops:
                return Opaque(" & ".join(o.why for o in ops), any(o.cc for o in ops))
            return not want
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            v = self.truth(self.expr(node.operand, env))
            return v if isinstance(v, Opaque) else not v
        if isinstance(node, ast.IfExp):
            t = self.truth(self.expr(node.test, env))
            if isinstance(t, Opaque):
                return Opaque(f"ifexp {dotted(node)}", True)
            return self.expr(node.body if t else node.orelse, env)
        if isinstance(node, ast.Compare):
            return self.compare(node, env)
        if isinstance(node, ast.Call):
            return self.call(node, env)
        if isinstance(node, ast.Attribute):
            if node.attr in ("major", "minor"):
                base = self.expr(node.value, env)
                if isinstance(base, CapObj):
                    return self.cc // 10 if node.attr == "major" else self.cc % 10
            return Opaque(f"attribute {dotted(node)}", False)
        return Opaque(f"expression {dotted(node)}", True)

    def compare(self, node: ast.Compare, env: dict[str, Any]) -> Any:
        left = self.expr(node.left, env)
        for op, right_node in zip(node.ops, node.comparators, strict=False):
            right = self.expr(right_node, env)
            vals = (left, right)
            if any(
                isinstance(v, tuple) and any(isinstance(x, (Opaque, CapObj)) for x in v)
                for v in vals
            ):
                return Opaque(f"compare {dotted(node)}", True)
            if isinstance(op, (ast.Is, ast.IsNot)) and right is None:
                if isinstance(left, Opaque):
                    return Opaque(f"compare {dotted(node)}", left.cc)
                res = (left is None) == isinstance(op, ast.Is)
            elif any(isinstance(v, Opaque) for v in vals) or any(
                isinstance(v, CapObj) for v in vals
            ):
                cc = any(isinstance(v, CapObj) or (isinstance(v, Opaque) and v.cc) for v in vals)
                return Opaque(f"compare {dotted(node)}", cc)
            else:
                try:
                    res = {
                        ast.Eq: lambda a, b: a == b,
                        ast.NotEq: lambda a, b: a != b,
                        ast.Lt: lambda a, b: a < b,
                        ast.LtE: lambda a, b: a <= b,
                        ast.Gt: lambda a, b: a > b,
                        ast.GtE: lambda a, b: a >= b,
                        ast.In: lambda a, b: a in b,
                        ast.NotIn: lambda a, b: a not in b,
                    }[type(op)](left, right)
                except (KeyError, TypeError):
                    return Opaque(f"compare {dotted(node)}", True)
            if not res:
                return False
            left = right
        return True

    def call(self, node: ast.Call, env: dict[str, Any]) -> Any:
        name = call_name(node)
        args = [self.expr(a, env) for a in node.args]
        if name in CAP_FUNCS:
            if not args:
                return Opaque(f"{name}()", True)
            cap = args[0]
            if isinstance(cap, tuple) and len(cap) == 2 and all(isinstance(x, int) for x in cap):
                cap = cap[0] * 10 + cap[1]
            if not isinstance(cap, int):
                return Opaque(f"{dotted(node)}", True)
            if name == "has_device_capability":
                return self.cc >= cap
            if name == "is_device_capability":
                return self.cc == cap
            return self.cc // 10 == cap // 10
        if name in PLATFORM_TRUE:
            return True
        if name in PLATFORM_FALSE:
            return False
        if name == "get_device_capability":
            return CapObj()
        if name == "to_int" and isinstance(node.func, ast.Attribute):
            base = self.expr(node.func.value, env)
            return self.cc if isinstance(base, CapObj) else Opaque(dotted(node), True)
        cc_arg = any(
            isinstance(a, CapObj) or (a == self.cc and isinstance(a, int) and a >= 70) for a in args
        )
        fn = self.helper(name) if self.depth < 6 else None
        if fn is not None:
            params = [a.arg for a in fn.args.args]
            if params and params[0] in ("cls", "self"):
                params = params[1:]
            try:
                outs = GateEval(self.src, self.cc, self.depth + 1).run_function(
                    fn, dict(zip(params, args, strict=False))
                )
            except Unsupported:
                text = ast.unparse(fn)
                cc_dep = any(c in text for c in CAP_FUNCS | {"get_device_capability"})
                return Opaque(f"{name}()", cc_dep)
            vals = {(repr(o.value) if isinstance(o.value, Opaque) else o.value) for o in outs}
            if len(vals) == 1 and not any(o.tainted for o in outs):
                v = outs[0].value
                return v
            tainted = any(o.tainted or (isinstance(o.value, Opaque) and o.value.cc) for o in outs)
            return Opaque(f"{name}()", tainted)
        return Opaque(f"{dotted(node)}", cc_arg)


def gate(src: Source, fn: ast.FunctionDef) -> dict[str, Any]:
    """Which CCs a boolean (or (bool, reason)) gate function can return True at, on CUDA."""
    accepts: dict[str, bool | None] = {}
    unknown_reqs: set[str] = set()
    notes: set[str] = set()
    for cc in CCS:
        try:
            params = [a.arg for a in fn.args.args if a.arg not in ("cls", "self")]
            outs = GateEval(src, cc).run_function(fn, {p: None for p in params})
        except (Unsupported, RecursionError) as exc:
            accepts[str(cc)] = None
            notes.add(f"the evaluator does not model {exc}")
            continue
        clean_true = any(o.value is True and not o.tainted for o in outs)
        any_true = any(o.value is True for o in outs)
        opaque = [o for o in outs if isinstance(o.value, Opaque)]
        for o in outs:
            unknown_reqs.update(o.unknowns)
        if clean_true:
            accepts[str(cc)] = True
        elif any_true or any(o.value.cc for o in opaque):  # type: ignore[union-attr]
            accepts[str(cc)] = None
            notes.add("depends on " + ", ".join(sorted({w for o in outs for w in o.unknowns})))
        elif opaque:
            accepts[str(cc)] = True
        else:
            accepts[str(cc)] = False
    caps = sorted(
        {
            f"{call_name(n)}({', '.join(dotted(a) for a in n.args)})"
            for n in ast.walk(fn)
            if isinstance(n, ast.Call) and call_name(n) in CAP_FUNCS
        }
    )
    calls = sorted(
        {
            call_name(n)
            for n in ast.walk(fn)
            if isinstance(n, ast.Call)
            and call_name(n) not in CAP_FUNCS | {"is_cuda", "get_device_capability", "to_int"}
            and not call_name(n).endswith("_once")
        }
    )
    out: dict[str, Any] = {
        "accepts_cc": accepts,
        "capability_checks": caps,
        "calls": calls,
        "source_sha": sha(ast.unparse(fn)),
    }
    if notes:
        out["unverified"] = "; ".join(sorted(notes))
    return out


def accepted(g: dict[str, Any] | None) -> list[int] | None:
    """The CCs a gate accepts, or None when any verdict is unknown."""
    if g is None:
        return None
    vals = g["accepts_cc"]
    if any(v is None for v in vals.values()):
        return None
    return [int(k) for k, v in vals.items() if v]


# --------------------------------------------------------------------------------------------
# envs.py


def parse_getter(node: ast.AST) -> dict[str, Any]:
    """Describe one `environment_variables` entry: kind, default, choices, deprecation."""
    if isinstance(node, ast.Call):
        name = call_name(node)
        if name == "deprecated_env" and len(node.args) >= 4:
            inner = parse_getter(node.args[3])
            inner["deprecated"] = {
                "removal_version": literal(node.args[1]),
                "replacement": literal(node.args[2]),
            }
            return inner
        if name in ("env_with_choices", "env_list_with_choices"):
            kw = {k.arg: k.value for k in node.keywords}
            d: dict[str, Any] = {
                "kind": name,
                "default": literal(node.args[1] if len(node.args) > 1 else kw.get("default")),
                "choices": literal(node.args[2] if len(node.args) > 2 else kw.get("choices")),
            }
            cs = node.args[3] if len(node.args) > 3 else kw.get("case_sensitive")
            d["case_sensitive"] = literal(cs) if cs is not None else "<helper default>"
            return d
    if isinstance(node, ast.Lambda):
        body = node.body
        getenv = [
            n
            for n in ast.walk(body)
            if isinstance(n, ast.Call) and call_name(n) in ("getenv", "get") and n.args
        ]
        default = literal(getenv[0].args[1]) if getenv and len(getenv[0].args) > 1 else None
        src = dotted(body)
        if re.fullmatch(r"bool\(int\(os\.(getenv|environ\.get)\([^()]*\)\)\)", src):
            kind = "bool(int())"
        elif re.fullmatch(r"int\(os\.(getenv|environ\.get)\([^()]*\)\)", src):
            kind = "int()"
        elif re.fullmatch(r"os\.(getenv|environ\.get)\([^()]*\)", src):
            kind = "str"
        else:
            kind = "expression"
        d = {"kind": kind, "default": default}
        if kind == "bool(int())":
            d["on_invalid"] = "ValueError from int() at first read"
        if kind == "expression":
            d["source"] = src
        return d
    return {"kind": "other", "source": dotted(node)}


def extract_envs(src: Source) -> dict[str, Any]:
    member = "vllm/envs.py"
    tree = src.tree(member)
    if tree is None:
        return {"unverified": "vllm/envs.py not in wheel"}
    table = module_assign(tree, "environment_variables")
    if not isinstance(table, ast.Dict):
        return {"unverified": "environment_variables dict not found"}
    declared: list[str] = []
    fp4: dict[str, Any] = {}
    for k, v in zip(table.keys, table.values, strict=False):
        if not (isinstance(k, ast.Constant) and isinstance(k.value, str)):
            continue
        declared.append(k.value)
        if FP4_ENV_RE.search(k.value):
            fp4[k.value] = parse_getter(v)
    out: dict[str, Any] = {
        "path": member,
        "declared": sorted(n for n in declared if n.startswith("VLLM_")),
        "declared_other": sorted(n for n in declared if not n.startswith("VLLM_")),
        "fp4": fp4,
    }
    helpers = {}
    for name in ("env_with_choices", "deprecated_env"):
        for fn in iter_defs(tree):
            if isinstance(fn, ast.FunctionDef) and fn.name == name:
                info: dict[str, Any] = {"source_sha": sha(ast.unparse(fn))}
                defaults = (
                    dict(
                        zip(
                            [a.arg for a in fn.args.args][-len(fn.args.defaults) :],
                            fn.args.defaults,
                            strict=False,
                        )
                    )
                    if fn.args.defaults
                    else {}
                )
                if "case_sensitive" in defaults:
                    info["case_sensitive_default"] = literal(defaults["case_sensitive"])
                text = ast.unparse(fn)
                if name == "env_with_choices":
                    # os.getenv() None -> default; anything else, "" included, is validated.
                    info["empty_string_is_validated"] = "if value is None" in text
                if name == "deprecated_env":
                    info["warning"] = "FutureWarning" if "FutureWarning" in text else None
                helpers[name] = info
    for d in fp4.values():
        if d.get("case_sensitive") == "<helper default>":
            d["case_sensitive"] = helpers.get("env_with_choices", {}).get("case_sensitive_default")
    out["helpers"] = helpers
    removed = module_assign(tree, "removed_environment_variables")
    if isinstance(removed, ast.Dict):
        # 0.34+: a variable listed here is an error when set (Platform.validate_environ raises
        # ValueError(f"{env} has been removed. {hint}")), not an unknown-variable warning.
        interface = src.texts.get("vllm/platforms/interface.py", "")
        out["removed"] = {
            "names": {
                k.value: literal(v)
                for k, v in zip(removed.keys, removed.values, strict=False)
                if isinstance(k, ast.Constant) and isinstance(k.value, str)
            },
            "raises_in": "vllm/platforms/interface.py validate_environ"
            if "removed_environment_variables.get" in interface and "has been removed" in interface
            else None,
        }
    return out


# --------------------------------------------------------------------------------------------
# Command-line flags


def literal_alias(tree: ast.Module, name: str) -> list[str] | None:
    node = module_assign(tree, name)
    if isinstance(node, ast.Subscript) and dotted(node.value).endswith("Literal"):
        vals = literal(node.slice)
        return list(vals) if isinstance(vals, tuple) else [vals]
    return None


def extract_cli(src: Source) -> dict[str, Any]:
    out: dict[str, Any] = {}
    kernel = src.tree("vllm/config/kernel.py")
    args_text = src.texts.get("vllm/engine/arg_utils.py", "")
    for flag, alias, fieldname in (
        ("--linear-backend", "LinearBackend", "linear_backend"),
        ("--moe-backend", "MoEBackend", "moe_backend"),
    ):
        if f'"{flag}"' not in args_text:
            continue
        entry: dict[str, Any] = {"argparse": "vllm/engine/arg_utils.py"}
        choices = literal_alias(kernel, alias) if kernel is not None else None
        if choices is None:
            entry["choices"] = None
            entry["unverified"] = f"{alias} Literal not found in vllm/config/kernel.py"
        else:
            entry["choices"] = choices
            entry["path"] = "vllm/config/kernel.py"
        m = re.search(
            rf'{fieldname}_kwargs\["type"\]\s*=\s*lambda s: (s\.lower\(\)\.replace\("-", "_"\))',
            args_text,
        )
        ktext = src.texts.get("vllm/config/kernel.py", "")
        v = re.search(rf"def _normalize_{fieldname}\(.*?\n(.*?)\n\n", ktext, re.S)
        entry["case_sensitive"] = not (m or (v and 'value.lower().replace("-", "_")' in v.group(1)))
        entry["normalisation"] = 'lower(), "-" -> "_"' if not entry["case_sensitive"] else None
        if kernel is not None:
            for node in ast.walk(kernel):
                if (
                    isinstance(node, ast.AnnAssign)
                    and dotted(node.target) == fieldname
                    and node.value is not None
                ):
                    entry["default"] = literal(node.value)
                    break
        out[flag] = entry
    return out


# --------------------------------------------------------------------------------------------
# has_flashinfer()


def extract_has_flashinfer(src: Source) -> dict[str, Any] | None:
    member = "vllm/utils/flashinfer.py"
    tree = src.tree(member)
    if tree is None:
        return None
    fns = {n.name: n for n in iter_defs(tree) if isinstance(n, ast.FunctionDef)}
    fn = fns.get("has_flashinfer")
    if fn is None:
        return {"path": member, "unverified": "has_flashinfer not defined"}
    # The function and the same-module helpers it calls, transitively.
    seen: list[ast.FunctionDef] = []
    todo = [fn]
    while todo:
        f = todo.pop()
        if f in seen:
            continue
        seen.append(f)
        for n in ast.walk(f):
            if isinstance(n, ast.Call) and call_name(n) in fns and isinstance(n.func, ast.Name):
                todo.append(fns[call_name(n)])
    text = "\n".join(ast.unparse(f) for f in seen)
    strings = {n.value for f in seen for n in ast.walk(f) if isinstance(n, ast.Constant)}
    req = {
        "flashinfer_importable": "flashinfer" in strings,
        "flashinfer_cubin": "flashinfer_cubin" in strings or "flashinfer-cubin" in strings,
        "env_VLLM_HAS_FLASHINFER_CUBIN": "VLLM_HAS_FLASHINFER_CUBIN" in text,
        "nvcc": "nvcc" in text,
        "ninja": "ninja" in text,
    }
    return {
        "path": member,
        "functions": sorted(f.name for f in seen),
        "checks": req,
        "returns": [
            {"when": p["when"], "return": p["return"]}
            for p in decision_paths(fn.body, {"return"})
            if "return" in p
        ],
        "source_sha": sha(text),
    }


# --------------------------------------------------------------------------------------------
# Linear NVFP4


LINEAR_SELECTORS = (
    # (member suffix, class or None, function)
    ("quantization/modelopt.py", "ModelOptNvFp4LinearMethod", "__init__"),
    (
        "compressed_tensors/schemes/compressed_tensors_w4a4_nvfp4.py",
        "CompressedTensorsW4A4Fp4",
        "__init__",
    ),
    ("quantization/utils/nvfp4_utils.py", None, "select_nvfp4_linear_backend"),
    ("model_executor/kernels/linear/__init__.py", None, "init_nvfp4_linear_kernel"),
)


def find_fn(
    src: Source, suffix: str, cls: str | None, name: str
) -> tuple[str, ast.FunctionDef] | None:
    member = src.find(suffix)
    tree = src.tree(member) if member else None
    if tree is None or member is None:
        return None
    for node in tree.body:
        if cls is None and isinstance(node, ast.FunctionDef) and node.name == name:
            return member, node
        if cls is not None and isinstance(node, ast.ClassDef) and node.name == cls:
            m = method(node, name)
            if m is not None:
                return member, m
    return None


def selector_info(member: str, fn: ast.FunctionDef, label: str) -> dict[str, Any]:
    paths = decision_paths(fn.body, SELECT_TARGETS)
    return {
        "path": member,
        "function": label,
        "source_sha": sha(ast.unparse(fn)),
        "reads": env_refs(fn),
        "selections": paths,
    }


def kernel_classes(src: Source) -> dict[str, tuple[str, ast.ClassDef]]:
    out: dict[str, tuple[str, ast.ClassDef]] = {}
    for member in sorted(src.texts):
        if "/kernels/linear/nvfp4/" not in member:
            continue
        tree = src.tree(member)
        assert tree is not None
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                out[node.name] = (member, node)
    return out


def class_method(
    src: Source, classes: dict[str, tuple[str, ast.ClassDef]], name: str, meth: str
) -> tuple[str, ast.FunctionDef] | None:
    """`meth` of class `name`, searching its bases among `classes` breadth-first."""
    seen: set[str] = set()
    todo = [name]
    while todo:
        name = todo.pop(0)
        if name in seen or name not in classes:
            continue
        seen.add(name)
        member, cls = classes[name]
        m = method(cls, meth)
        if m is not None:
            return member, m
        todo += [dotted(b).split(".")[-1] for b in cls.bases]
    return None


HELPERS = (
    "cutlass_fp4_supported",
    "is_fp4_marlin_supported",
    "has_flashinfer",
    "has_flashinfer_b12x_gemm",
    "has_flashinfer_bf16_fp4",
    "prefers_humming",
    "prioritize_humming",
)


def extract_linear(src: Source) -> dict[str, Any]:
    out: dict[str, Any] = {}
    sels = []
    for suffix, cls, fn_name in LINEAR_SELECTORS:
        hit = find_fn(src, suffix, cls, fn_name)
        if hit:
            label = f"{cls}.{fn_name}" if cls else fn_name
            sels.append(selector_info(hit[0], hit[1], label))
    out["selectors"] = sels

    init = src.find("model_executor/kernels/linear/__init__.py")
    tree = src.tree(init) if init else None
    order: list[str] | None = None
    if tree is not None:
        poss = module_assign(tree, "_POSSIBLE_NVFP4_KERNELS")
        if poss is not None:
            order = list_of_names(dict_value(poss, "PlatformEnum.CUDA") or ast.List(elts=[]))
            out["auto_order"] = {
                "path": init,
                "source": "_POSSIBLE_NVFP4_KERNELS[CUDA]",
                "kernels": order,
            }
        envmap = module_assign(tree, "_NVFP4_BACKEND_TO_KERNEL")
        if isinstance(envmap, ast.Dict):
            out["env_backend_to_kernel"] = {
                literal(k): dotted(v) for k, v in zip(envmap.keys, envmap.values, strict=False) if k
            }
        lbmap = module_assign(tree, "_LINEAR_BACKEND_KERNEL_MAP")
        if isinstance(lbmap, ast.Dict):
            m: dict[str, list[str]] = {}
            for k, v in zip(lbmap.keys, lbmap.values, strict=False):
                names = [dotted(e) for e in getattr(v, "elts", [])]
                nv = sorted(n for n in names if "NvFp4" in n)
                if k is not None and nv:
                    m[str(literal(k))] = nv
            out["linear_backend_to_kernels"] = m
        elif tree is not None:
            # Before the explicit map, _filter_kernels_by_backend matched by name.
            f = next(
                (
                    n
                    for n in tree.body
                    if isinstance(n, ast.FunctionDef) and n.name == "_filter_kernels_by_backend"
                ),
                None,
            )
            if f is not None:
                out["linear_backend_filter"] = {
                    "path": init,
                    "source_sha": sha(ast.unparse(f)),
                    "unverified": "backend -> kernel matching is computed by "
                    "_filter_kernels_by_backend; see its source",
                    "source": ast.unparse(f),
                }
        for fname in ("_resolve_backend_kernels", "init_nvfp4_linear_kernel"):
            f = next(
                (n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == fname),
                None,
            )
            if f is not None and fname == "_resolve_backend_kernels":
                out["resolve_backend_kernels"] = {
                    "path": init,
                    "source_sha": sha(ast.unparse(f)),
                    "calls": sorted({call_name(n) for n in ast.walk(f) if isinstance(n, ast.Call)}),
                }
    if tree is not None:
        out["linear_backend_no_match"] = no_match(tree, init or "")
    if order is None:
        out["auto_order"] = None
        out["auto_order_note"] = (
            "no kernel registry in this release: the automatic order is the if/elif chain in "
            "'selectors' (conditions in source order)"
        )

    classes = kernel_classes(src)
    kernels: dict[str, Any] = {}
    for name in sorted(classes):
        if "NvFp4" not in name or not name.endswith("Kernel") or name == "NvFp4LinearKernel":
            continue
        member, cls = classes[name]
        hit = class_method(src, classes, name, "is_supported")
        entry: dict[str, Any] = {"path": member}
        if hit is None:
            entry["gate"] = None
            entry["unverified"] = "no is_supported found on class or its bases"
        else:
            entry["gate"] = gate(src, hit[1])
            entry["gate"]["path"] = hit[0]
        kernels[name] = entry
    out["kernels"] = kernels

    helpers: dict[str, Any] = {}
    for h in HELPERS:
        defs = [(m, n) for m, n in src.defs(h) if isinstance(n, ast.FunctionDef)]
        if not defs:
            continue
        m, fn = defs[0]
        info = (
            gate(src, fn)
            if h not in ("prioritize_humming",)
            else {"source_sha": sha(ast.unparse(fn))}
        )
        info["path"] = m
        if len({ast.dump(d[1]) for d in defs}) > 1:
            info["unverified"] = "defined more than once with different bodies: " + ", ".join(
                d[0] for d in defs
            )
        if h in ("prefers_humming", "prioritize_humming"):
            info["source"] = ast.unparse(fn)
        helpers[h] = info
    out["helpers"] = helpers

    # The FBGEMM quirk: in compressed-tensors, VLLM_USE_FBGEMM is consulted only on the branch
    # where VLLM_NVFP4_GEMM_BACKEND is set.
    ct = next((s for s in sels if s["function"].startswith("CompressedTensorsW4A4Fp4")), None)
    if ct is not None:
        quirk = None
        for p in ct["selections"]:
            if p.get("to") == "'fbgemm'":
                quirk = any(
                    "VLLM_NVFP4_GEMM_BACKEND is None" in c and c.startswith("not (")
                    for c in p["when"]
                )
        out["fbgemm_quirk"] = {
            "value": quirk,
            "path": ct["path"],
            "meaning": "compressed-tensors selects fbgemm only when VLLM_USE_FBGEMM=1 AND "
            "VLLM_NVFP4_GEMM_BACKEND is set (to any valid value)",
        }
    out["precedence"] = precedence(sels)
    return out


def no_match(tree: ast.Module, member: str) -> dict[str, Any] | None:
    """What happens when --linear-backend names a backend with no NVFP4 kernel: the
    `if not filtered:` block in the selection helpers raises, or falls back to the auto order."""
    names = ("init_nvfp4_linear_kernel", "_resolve_backend_kernels", "_filter_kernels_by_backend")
    for fn in tree.body:
        if not (isinstance(fn, ast.FunctionDef) and fn.name in names):
            continue
        for n in ast.walk(fn):
            if isinstance(n, ast.If) and dotted(n.test) == "not filtered":
                block = ast.Module(body=n.body, type_ignores=[])
                if any(isinstance(x, ast.Raise) for x in ast.walk(block)):
                    what = "raise"
                elif any(isinstance(x, ast.Return) for x in ast.walk(block)):
                    what = "fallback_to_auto_order"
                else:
                    what = None
                return {"behaviour": what, "function": fn.name, "path": member}
    return None


def precedence(sels: list[dict[str, Any]]) -> dict[str, Any] | None:
    """From the newest-style selector: the order knobs are tested in, and for each env var
    whether every selection that depends on it also requires `linear_backend == 'auto'`."""
    if not sels:
        return None
    s = sels[-1]
    order: list[str] = []
    only_when_auto: dict[str, bool] = {}
    for p in s["selections"]:
        for c in p["when"]:
            if c.startswith("not ("):
                continue
            for name in re.findall(r"VLLM_[A-Z0-9_]+|linear_backend|use_a16", c):
                if name not in order:
                    order.append(name)
        positive = [c for c in p["when"] if not c.startswith("not (")]
        for name in {n for c in positive for n in re.findall(r"VLLM_[A-Z0-9_]+", c)}:
            auto = any(re.search(r"linear_backend == 'auto'", c) for c in positive)
            only_when_auto[name] = only_when_auto.get(name, True) and auto
    return {
        "function": s["function"],
        "path": s["path"],
        "tested_in_order": order,
        "env_read_only_when_linear_backend_auto": only_when_auto
        if any("linear_backend" in o for o in order)
        else None,
    }


# --------------------------------------------------------------------------------------------
# MoE NVFP4


def enum_members(tree: ast.Module, name: str) -> dict[str, Any] | None:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return {
                dotted(s.targets[0]): literal(s.value)
                for s in node.body
                if isinstance(s, ast.Assign)
            }
    return None


def import_map(fn: ast.FunctionDef) -> dict[str, list[dict[str, Any]]]:
    """backend_to_kernel_cls: `if backend == X: from M import C...; return [...]`."""
    out: dict[str, list[dict[str, Any]]] = {}

    def walk(stmts: list[ast.stmt]) -> None:
        for s in stmts:
            if isinstance(s, ast.If):
                m = re.fullmatch(r"backend == (NvFp4MoeBackend\.\w+)", dotted(s.test))
                if m:
                    imports = {
                        a.asname or a.name: n.module
                        for n in ast.walk(ast.Module(body=s.body, type_ignores=[]))
                        if isinstance(n, ast.ImportFrom)
                        for a in n.names
                    }
                    rets = [n for n in s.body if isinstance(n, ast.Return)]
                    names = []
                    for r in rets:
                        v = r.value
                        names += list_of_names(v) or ([dotted(v)] if v is not None else [])
                    out[m.group(1)] = [{"class": c, "module": imports.get(c)} for c in names]
                walk(s.orelse)

    walk(fn.body)
    return out


def module_member(module: str | None) -> str | None:
    return None if module is None else module.replace(".", "/") + ".py"


def extract_moe(src: Source) -> dict[str, Any]:
    out: dict[str, Any] = {}
    oracle = src.find("fused_moe/oracle/nvfp4.py")
    tree = src.tree(oracle) if oracle else None
    if tree is not None and oracle is not None:
        out["oracle"] = oracle
        out["backends_enum"] = enum_members(tree, "NvFp4MoeBackend")
        sel = next(
            (
                n
                for n in tree.body
                if isinstance(n, ast.FunctionDef) and n.name == "select_nvfp4_moe_backend"
            ),
            None,
        )
        if sel is not None:
            first = next(
                (
                    s
                    for s in ast.walk(sel)
                    if isinstance(s, ast.Assign) and dotted(s.targets[0]) == "AVAILABLE_BACKENDS"
                ),
                None,
            )
            out["auto_order"] = list_of_names(first.value) if first else None
            if first is None:
                out["auto_order_unverified"] = "no AVAILABLE_BACKENDS list in the selector"
            reorder = sorted(
                {
                    dotted(s.value.func)
                    for s in ast.walk(sel)
                    if isinstance(s, ast.Assign)
                    and dotted(s.targets[0]) == "AVAILABLE_BACKENDS"
                    and isinstance(s.value, ast.Call)
                }
            )
            if reorder:
                out["auto_order_reordered_by"] = reorder
            out["selector"] = {
                "function": "select_nvfp4_moe_backend",
                "source_sha": sha(ast.unparse(sel)),
                "reads": env_refs(sel),
                "uses_moe_backend": any(
                    isinstance(n, ast.Attribute) and n.attr == "moe_backend" for n in ast.walk(sel)
                ),
                "selections": decision_paths(sel.body, {"backend", "return"}),
            }
        mp = next(
            (
                n
                for n in tree.body
                if isinstance(n, ast.FunctionDef) and n.name == "map_nvfp4_backend"
            ),
            None,
        )
        if mp is not None:
            pairs = {}
            for p in decision_paths(mp.body, {"return"}):
                pos = [c for c in p["when"] if not c.startswith("not (")]
                if p.get("return") and pos:
                    pairs[pos[-1]] = p["return"]
            out["moe_backend_map"] = {"source_sha": sha(ast.unparse(mp)), "when_return": pairs}
        b2k = next(
            (
                n
                for n in tree.body
                if isinstance(n, ast.FunctionDef) and n.name == "backend_to_kernel_cls"
            ),
            None,
        )
        if b2k is not None:
            experts: dict[str, Any] = {}
            for backend, classes in import_map(b2k).items():
                rows = []
                for c in classes:
                    row: dict[str, Any] = {"class": c["class"], "path": module_member(c["module"])}
                    row.update(expert_gate(src, c["class"], row["path"]))
                    rows.append(row)
                experts[backend] = rows
            out["experts"] = experts
    # Older releases: the flashinfer_fp4_moe / nvfp4_moe_support helpers and method __init__s.
    legacy = {}
    for suffix, cls, fn_name in (
        ("quantization/modelopt.py", "ModelOptNvFp4FusedMoE", "__init__"),
        ("quantization/utils/nvfp4_moe_support.py", None, "detect_nvfp4_moe_support"),
        (
            "quantization/utils/flashinfer_fp4_moe.py",
            None,
            "is_flashinfer_fp4_cutlass_moe_available",
        ),
        (
            "quantization/utils/flashinfer_fp4_moe.py",
            None,
            "is_flashinfer_fp4_cutedsl_moe_available",
        ),
        ("quantization/utils/flashinfer_utils.py", None, "get_flashinfer_moe_backend"),
    ):
        hit = find_fn(src, suffix, cls, fn_name)
        if hit is None:
            continue
        label = f"{cls}.{fn_name}" if cls else fn_name
        info = selector_info(hit[0], hit[1], label)
        info["selections"] = decision_paths(
            hit[1].body,
            SELECT_TARGETS
            | {"return", "self.use_marlin", "self.allow_flashinfer", "self.flashinfer_moe_backend"},
        )
        if fn_name.startswith("is_flashinfer") or fn_name == "detect_nvfp4_moe_support":
            info["gate"] = gate(src, hit[1])
        legacy[label] = info
    out["functions"] = legacy
    return out


def expert_gate(src: Source, cls_name: str, member: str | None) -> dict[str, Any]:
    """The device gate of one MoE experts class (`_supports_current_device`)."""
    classes: dict[str, tuple[str, ast.ClassDef]] = {}
    for m in sorted(src.texts):
        if "/fused_moe/" not in m:
            continue
        tree = src.tree(m)
        assert tree is not None
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                classes.setdefault(node.name, (m, node))
    if member and member not in src.texts:
        return {"gate": None, "unverified": f"{member} was not read"}
    hit = class_method(src, classes, cls_name, "_supports_current_device")
    if hit is None:
        return {"gate": None, "unverified": "no _supports_current_device on class or bases read"}
    g = gate(src, hit[1])
    g["path"] = hit[0]
    return {"gate": g}


# --------------------------------------------------------------------------------------------
# Driver


# A raise is a shape rule when its conditions take a size modulo something or its message
# speaks of padding, multiples, divisibility or alignment.
SHAPE_RE = re.compile(r"%|padding|multiple of|divisible|align", re.I)


def extract_shape_guards(src: Source) -> list[dict[str, Any]]:
    """Every raise in the NVFP4 functions read (`Class.method` of an `*Fp4*` class, or a module
    function of a `*fp4*` file) that refuses a shape: path, function, conditions, the raise."""
    out: list[dict[str, Any]] = []
    for member in sorted(src.texts):
        tree = src.tree(member)
        if member in NO_DEFS or tree is None:
            continue
        fp4_file = "fp4" in member.rsplit("/", 1)[-1].lower()
        functions: list[tuple[str, ast.FunctionDef]] = []
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and fp4_file:
                functions.append((node.name, node))
            elif isinstance(node, ast.ClassDef) and "fp4" in node.name.lower():
                methods = [f for f in node.body if isinstance(f, ast.FunctionDef)]
                functions += [(f"{node.name}.{f.name}", f) for f in methods]
        for name, fn in functions:
            for p in decision_paths(fn.body, set()):
                if "raise" in p and SHAPE_RE.search(" ".join([*p["when"], p["raise"] or ""])):
                    out.append({"path": member, "function": name, **p})
    return out


def extract(src: Source) -> dict[str, Any]:
    rel = src.release
    envs = extract_envs(src)
    text_all = {m: t for m, t in src.texts.items() if m != "vllm/envs.py"}
    fp4_names = sorted(envs.get("fp4", {}))
    readers = {
        n: sorted(m for m, t in text_all.items() if re.search(rf"\b{n}\b", t)) for n in fp4_names
    }
    return {
        "wheel": rel.wheel_name,
        "yanked": rel.yanked,
        "files": {m: sha(t) for m, t in sorted(src.texts.items())},
        "envs": envs,
        "env_read_by": readers,
        "cli": extract_cli(src),
        "has_flashinfer": extract_has_flashinfer(src),
        "linear": extract_linear(src),
        "moe": extract_moe(src),
        "shape_guards": extract_shape_guards(src),
    }


def run(only: Iterable[str] | None, jobs: int) -> dict[str, Any]:
    rels = releases(PROJECT)
    wanted = set(only) if only else None
    # The first NVFP4 release: walk back from the newest until modelopt.py lacks NVFP4.
    newest_first = sorted(rels, key=lambda r: Version(r.version), reverse=True)
    covered: list[Release] = []
    skipped: list[str] = []
    for r in newest_first:
        if has_nvfp4(r):
            covered.append(r)
        else:
            skipped.append(r.version)
            break
    covered.reverse()
    if wanted is not None:
        covered = [r for r in covered if r.version in wanted]
    with ThreadPoolExecutor(jobs) as ex:  # network-bound on a cold cache
        list(ex.map(load, covered))
    with ProcessPoolExecutor(jobs) as px:  # CPU-bound: parsing and evaluating
        results = dict(
            zip([r.version for r in covered], px.map(load_and_extract, covered), strict=False)
        )
    data = {
        "project": PROJECT,
        "extracted_by": "tools/extract/vllm.py",
        "covers": [r.version for r in covered],
        "first_without_nvfp4": skipped[0] if skipped else None,
        "compute_capabilities_evaluated": list(CCS),
        "releases": results,
    }
    if wanted is None:
        # Beside the records (which stay as they were): each release's FlashInfer pins, so
        # tools/extract/releases.py can name a release the index alone cannot install.
        with ThreadPoolExecutor(jobs) as ex:
            pins = dict(zip(data["covers"], ex.map(flashinfer_pins, covered), strict=True))
        data["requires_flashinfer"] = pins
        # Beside them: which compiled module holds each FP4 op's kernel (profiles/vllm.yaml's
        # compiled_arch rules read those files; tests/test_engine_binaries.py checks them).
        with ThreadPoolExecutor(jobs) as ex:
            built = dict(zip(data["covers"], ex.map(extensions, covered), strict=True))
        data["extensions"] = built
    return data


def load_and_extract(release: Release) -> dict[str, Any]:
    """One release, end to end (a process-pool worker)."""
    return extract(load(release))


def _cc_list(g: dict[str, Any] | None) -> str:
    if g is None:
        return "null"
    vals = g["accepts_cc"]
    ccs = [k for k in sorted(vals, key=int) if vals[k] is not False]
    unknown = [k for k in sorted(vals, key=int) if vals[k] is None]
    return ",".join(ccs) + (f" (unverified: {','.join(unknown)})" if unknown else "")


def summary(rec: dict[str, Any]) -> dict[str, str]:
    """The fields a maintainer compares between releases, flattened to strings."""
    s: dict[str, str] = {}
    envs = rec["envs"]
    for name, d in envs.get("fp4", {}).items():
        s[f"env {name}"] = json.dumps(d, sort_keys=True)
    for flag, d in rec["cli"].items():
        s[f"cli {flag}"] = json.dumps(d.get("choices"))
    hf = rec["has_flashinfer"]
    s["has_flashinfer"] = json.dumps(hf and hf.get("checks"), sort_keys=True)
    lin = rec["linear"]
    s["linear auto_order"] = json.dumps(lin["auto_order"] and lin["auto_order"]["kernels"])
    for sel in lin["selectors"]:
        s[f"linear selector {sel['function']}"] = sel["source_sha"]
    for name, k in lin["kernels"].items():
        s[f"linear gate {name}"] = _cc_list(k["gate"])
    for name, h in lin["helpers"].items():
        s[f"linear helper {name}"] = _cc_list(h) if "accepts_cc" in h else h["source_sha"]
    s["linear fbgemm_quirk"] = json.dumps(lin.get("fbgemm_quirk", {}).get("value"))
    s["linear precedence"] = json.dumps(lin.get("precedence"), sort_keys=True)
    s["linear --linear-backend map"] = json.dumps(lin.get("linear_backend_to_kernels"))
    s["linear env map"] = json.dumps(lin.get("env_backend_to_kernel"), sort_keys=True)
    s["linear no-match"] = json.dumps(lin.get("linear_backend_no_match"), sort_keys=True)
    moe = rec["moe"]
    s["moe auto_order"] = json.dumps(moe.get("auto_order"))
    s["moe reads"] = json.dumps(moe.get("selector", {}).get("reads"))
    for backend, rows in (moe.get("experts") or {}).items():
        for row in rows:
            s[f"moe gate {backend}/{row['class']}"] = _cc_list(row.get("gate"))
    for name, f in moe.get("functions", {}).items():
        s[f"moe function {name}"] = f["source_sha"]
    return s


def boundaries(data: dict[str, Any]) -> Iterator[str]:
    """One line per field whose value differs from the previous release."""
    prev: dict[str, str] | None = None
    for v in data["covers"]:
        cur = summary(data["releases"][v])
        if prev is not None:
            for k in sorted(set(cur) | set(prev)):
                if cur.get(k) != prev.get(k):
                    yield f"{v}\t{k}\t{prev.get(k, 'absent')} -> {cur.get(k, 'absent')}"
        prev = cur


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", help="versions to print instead of writing the file")
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument(
        "--boundaries", action="store_true", help="also print every field change between releases"
    )
    a = ap.parse_args()
    t0 = time.monotonic()
    data = run(a.only, a.jobs)
    text = json.dumps(data, indent=1, sort_keys=True) + "\n"
    if a.only:
        sys.stdout.write(text)
        return
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text)
    if a.boundaries:
        for line in boundaries(data):
            print(line)
    print(f"wrote {OUT} ({len(data['covers'])} releases) in {time.monotonic() - t0:.1f} s")


if __name__ == "__main__":
    main()
