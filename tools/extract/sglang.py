"""Extract SGLang's NVFP4 GEMM knobs, automatic order and gates from every released wheel.

Run from the repository root: ``python3 tools/extract/sglang.py``. It lists every release of the
PyPI project ``sglang`` that has a wheel (tools/extract/wheels.py), reads only the Python files
it needs out of each wheel (HTTP range requests, cached under ~/.cache/fp4doctor-extract), parses
them with ``ast`` and writes tools/extract/data/sglang.json (sorted keys, no timestamps, so a
re-run over the same releases writes the same bytes). With ``--boundaries`` it also prints, for
every summary field, the releases where its value changes.

Nothing is guessed: a fact is either read from a literal in the wheel, or the function it lives
in is recorded by its SHA-256 (first 16 hex digits) with ``"unverified": "<why>"``.
Maintainer tooling: not part of the installed package.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import re
import sys
import threading
import time
import urllib.error
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import Version

sys.path.insert(0, str(Path(__file__).resolve().parent))
from wheels import Release, Wheel, releases

PROJECT = "sglang"
OUT = Path(__file__).resolve().parent / "data" / "sglang.json"
# Releases before this are not even opened: ModelOpt NVFP4 arrives in 0.4.5.post1.
FLOOR = Version("0.4.0")
WORKERS = 8
RETRIES = 5

SRT = "sglang/srt/"
QUANT = SRT + "layers/quantization/"
MODELOPT = QUANT + "modelopt_quant.py"
FP4_UTILS = QUANT + "fp4_utils.py"
SERVER_ARGS = SRT + "server_args.py"
ENVIRON = SRT + "environ.py"
MOE_UTILS = SRT + "layers/moe/utils.py"
CT_MOE = QUANT + "compressed_tensors/compressed_tensors_moe.py"
RUNTIME_CONTEXT = SRT + "runtime_context.py"
UTIL_FILES = (SRT + "utils/common.py", SRT + "utils.py")
JIT_NVFP4 = ("sglang/jit_kernel/nvfp4.py",)

# Packages whose pins are recorded from METADATA Requires-Dist.
PINNED = (
    "sgl-kernel",
    "sglang-kernel",
    "flashinfer-python",
    "flashinfer-cubin",
    "flashinfer-jit-cache",
    "nvidia-cutlass-dsl",
)
# Names a linear NVFP4 GEMM is called through in SGLang's code.
GEMM_NAMES = {
    "fp4_gemm",
    "flashinfer_fp4_gemm",
    "cutlass_fp4_gemm",
    "cutlass_scaled_fp4_mm",
    "mm_fp4",
    "mm_bf16_fp4",
}
GEMM_IMPORTS = {"mm_fp4", "cutlass_scaled_fp4_mm", "mm_bf16_fp4"}
ENV_RE = re.compile(r"\bSGLANG_[A-Z0-9_]+\b")
FP4_RE = re.compile(r"fp4", re.IGNORECASE)
NVFP4_RE = re.compile(r"(?<![mM][xX])fp4", re.IGNORECASE)  # FP4 but not MXFP4
PREDICATE_PARTIAL = "_check_cuda_device_version"
# `get_moe_runner_backend().is_<backend>()` and the older `enable_flashinfer_*_moe` switches.
MOE_PRED_RE = re.compile(
    r"is_(flashinfer_\w+|cutlass|triton\w*|marlin|deep_gemm|aiter|cutedsl\w*|humming|megamoe)"
)
MOE_FLAG_RE = re.compile(r"enable_flashinfer_\w*moe")


# ----------------------------------------------------------------------------- helpers


def digest(text: str) -> str:
    """The first 16 hex digits of the SHA-256 of `text` (how a function's source is named)."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def literal(node: ast.AST | None) -> Any:
    """The Python value of a literal node, or None when it is not a literal."""
    if node is None:
        return None
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def value_or_source(node: ast.AST | None) -> Any:
    """A literal's value, else the expression's source text as {"expr": ...}."""
    if node is None:
        return None
    val = literal(node)
    if val is not None or (isinstance(node, ast.Constant) and node.value is None):
        return list(val) if isinstance(val, tuple) else val
    return {"expr": ast.unparse(node)}


def call_name(node: ast.AST) -> str | None:
    """`f` for f(...), `attr` for x.attr(...)."""
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def parse(src: str | None) -> ast.Module | None:
    """Parse a module; None when missing or not parseable by this Python."""
    if src is None:
        return None
    try:
        return ast.parse(src)
    except SyntaxError:
        return None


def module_lists(tree: ast.Module) -> dict[str, list[str]]:
    """Module-level `NAME = [literal strings]` assignments."""
    out: dict[str, list[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            tgt, val = node.targets[0], literal(node.value)
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            tgt, val = node.target, literal(node.value)
        else:
            continue
        if (
            isinstance(tgt, ast.Name)
            and isinstance(val, (list, tuple))
            and all(isinstance(v, str) for v in val)
        ):
            out[tgt.id] = list(val)
    return out


def top_defs(tree: ast.Module) -> dict[str, ast.AST]:
    """Top-level functions and classes by name (the last definition wins, as at import)."""
    return {
        n.name: n
        for n in tree.body
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    }


def import_text(node: ast.ImportFrom | ast.Import) -> str:
    """A compact, line-number-free description of an import."""
    return ast.unparse(node)


def try_label(node: ast.Try) -> str:
    """Name a try block by the imports it tries (stable across releases, unlike line numbers)."""
    imps = [import_text(n) for n in node.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    return "; ".join(imps) if imps else f"try block ({len(node.body)} statements)"


def walk_paths(
    body: list[ast.stmt], visit: Callable[[ast.stmt, list[str]], None], path: list[str]
) -> None:
    """Visit every statement with the conditions that lead to it.

    An `if` adds its test (its `else` adds `not (test)`); a `try` adds `try[...]` to its body and
    `except E[...]` to each handler, named by the imports it tries.
    """
    for stmt in body:
        visit(stmt, path)
        if isinstance(stmt, ast.If):
            test = ast.unparse(stmt.test)
            walk_paths(stmt.body, visit, [*path, test])
            walk_paths(stmt.orelse, visit, [*path, f"not ({test})"])
        elif isinstance(stmt, ast.Try):
            label = try_label(stmt)
            walk_paths(stmt.body, visit, [*path, f"try[{label}]"])
            for h in stmt.handlers:
                exc = ast.unparse(h.type) if h.type is not None else "BaseException"
                walk_paths(h.body, visit, [*path, f"except {exc}[{label}]"])
            walk_paths(stmt.orelse, visit, [*path, f"try ok[{label}]"])
            walk_paths(stmt.finalbody, visit, path)
        elif isinstance(stmt, (ast.For, ast.While, ast.With)):
            walk_paths(stmt.body, visit, path)
            walk_paths(getattr(stmt, "orelse", []), visit, path)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            walk_paths(stmt.body, visit, path)


def calls_in(stmt: ast.stmt) -> Iterator[ast.Call]:
    """Calls made by a statement itself (not by nested blocks, which walk_paths visits)."""
    if isinstance(stmt, (ast.If, ast.While)):
        roots: list[ast.AST] = [stmt.test]
    elif isinstance(stmt, (ast.For,)):
        roots = [stmt.iter]
    elif isinstance(stmt, ast.With):
        roots = [i.context_expr for i in stmt.items]
    elif isinstance(stmt, (ast.Try, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        roots = []
    else:
        roots = [stmt]
    for root in roots:
        for n in ast.walk(root):
            if isinstance(n, ast.Call):
                yield n


# ----------------------------------------------------------------------------- reading


class Sources:
    """The Python files of one release that the extractor reads, parsed lazily."""

    def __init__(self, wheel: Wheel) -> None:
        self.wheel = wheel
        self._names = set(wheel.names())
        self._text: dict[str, str | None] = {}
        self._tree: dict[str, ast.Module | None] = {}

    def has(self, path: str) -> bool:
        return path in self._names

    def names(self) -> Iterable[str]:
        return sorted(self._names)

    def text(self, path: str) -> str | None:
        if path not in self._text:
            self._text[path] = self.wheel.text(path) if path in self._names else None
        return self._text[path]

    def tree(self, path: str) -> ast.Module | None:
        if path not in self._tree:
            self._tree[path] = parse(self.text(path))
        return self._tree[path]

    def first(self, paths: Iterable[str]) -> str | None:
        return next((p for p in paths if p in self._names), None)

    def metadata(self) -> str | None:
        meta = [n for n in self._names if n.endswith(".dist-info/METADATA")]
        return self.text(meta[0]) if len(meta) == 1 else None

    def arg_files(self) -> list[str]:
        """server_args.py and, from 0.5.16, the arg_groups package it was split into."""
        out = [SERVER_ARGS] if self.has(SERVER_ARGS) else []
        out += sorted(
            n
            for n in self._names
            if n.startswith(SRT + "arg_groups/")
            and n.endswith(".py")
            and "/model_overrides/" not in n
        )
        return out

    def fp4_scheme_files(self) -> list[str]:
        """Compressed-tensors (and other) FP4 quant modules under layers/quantization/."""
        return sorted(
            n
            for n in self._names
            if n.startswith(QUANT)
            and n.endswith(".py")
            and FP4_RE.search(n.rsplit("/", 1)[-1])
            and n != FP4_UTILS
            and "mxfp4" not in n
        ) + sorted(n for n in self._names if n == CT_MOE)


# ----------------------------------------------------------------------------- requirements


def requirements(src: Sources) -> dict[str, Any]:
    """Requires-Dist lines for the kernel and FlashInfer packages, with their markers."""
    meta = src.metadata()
    if meta is None:
        return {"unverified": "no single .dist-info/METADATA in the wheel"}
    out: dict[str, list[str]] = {}
    for line in meta.splitlines():
        if not line.startswith("Requires-Dist:"):
            continue
        raw = line.split(":", 1)[1].strip()
        try:
            req = Requirement(raw)
        except InvalidRequirement:
            continue
        name = req.name.lower().replace("_", "-")
        if name in PINNED:
            spec = f"{name}{req.specifier}" if str(req.specifier) else name
            if req.marker is not None:
                spec += f"; {req.marker}"
            out.setdefault(name, []).append(spec)
    return {k: sorted(set(v)) for k, v in sorted(out.items())}


# ----------------------------------------------------------------------------- server args


def _arg_fields(src: Sources) -> dict[str, dict[str, Any]]:
    """Every CLI option declared in the arg files: flag -> {choices, default, dest, file}."""
    lists: dict[str, list[str]] = {}
    field_default: dict[str, Any] = {}
    for path in src.arg_files():
        tree = src.tree(path)
        if tree is not None:
            lists.update(module_lists(tree))
    flags: dict[str, dict[str, Any]] = {}

    def choices_of(node: ast.AST | None) -> Any:
        if node is None:
            return None
        if isinstance(node, ast.Name) and node.id in lists:
            return {"name": node.id, "values": lists[node.id]}
        val = literal(node)
        if isinstance(val, (list, tuple)):
            return {"name": None, "values": list(val)}
        return {"name": None, "unverified": f"choices not a literal: {ast.unparse(node)}"}

    for path in src.arg_files():
        tree = src.tree(path)
        if tree is None:
            continue
        # Dataclass-style fields (ServerArgs and, from 0.5.20, the arg_groups/fields classes).
        for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
            for stmt in cls.body:
                if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
                    continue
                name = stmt.target.id
                default = value_or_source(stmt.value)
                field_default.setdefault(name, default)
                arg = next(
                    (
                        c
                        for c in ast.walk(stmt.annotation)
                        if isinstance(c, ast.Call) and call_name(c) == "Arg"
                    ),
                    None,
                )
                if arg is None:
                    continue
                kw = {k.arg: k.value for k in arg.keywords if k.arg}
                flag = literal(kw.get("cli_name")) or "--" + name.replace("_", "-")
                flags[flag] = {
                    "choices": choices_of(kw.get("choices")),
                    "default": default,
                    "dest": name,
                    "file": path,
                }
        # argparse add_argument calls.
        for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
            if call_name(call) != "add_argument" or not call.args:
                continue
            names = [literal(a) for a in call.args]
            long = [n for n in names if isinstance(n, str) and n.startswith("--")]
            if not long:
                continue
            kw = {k.arg: k.value for k in call.keywords if k.arg}
            dest = literal(kw.get("dest")) or long[0][2:].replace("-", "_")
            dnode = kw.get("default")
            if (
                isinstance(dnode, ast.Attribute)
                and isinstance(dnode.value, ast.Name)
                and dnode.value.id == "ServerArgs"
            ):
                default: Any = {"field": dnode.attr}
            else:
                default = value_or_source(dnode)
            for flag in long:
                flags[flag] = {
                    "choices": choices_of(kw.get("choices")),
                    "default": default,
                    "dest": dest,
                    "file": path,
                }
    for info in flags.values():
        d = info["default"]
        if isinstance(d, dict) and "field" in d:
            info["default"] = field_default.get(d["field"], {"unverified": "field not found"})
    return flags


def _assigned_via(target: ast.expr, attr: str) -> str | None:
    """How `target` assigns `<attr>`: "" as `x.<attr>`, "local" as a name, "key" as
    `d["<attr>"]`; None when it does not."""
    if isinstance(target, ast.Attribute) and target.attr == attr:
        return ""
    if isinstance(target, ast.Name) and target.id == attr:
        return "local"
    if (
        isinstance(target, ast.Subscript)
        and isinstance(target.slice, ast.Constant)
        and target.slice.value == attr
    ):
        return "key"
    return None


def _assignments_to(src: Sources, attr: str) -> list[dict[str, Any]]:
    """Post-parse rewrites of `<attr>` in the arg files, with the path that leads there:
    `x.<attr> = value`, and (the post-process passes of 0.5.16+, which return the fields they
    resolve) a local `<attr> = value` (`via: local`) or `overrides["<attr>"] = value`
    (`via: key`)."""
    out: list[dict[str, Any]] = []
    for path in src.arg_files():
        tree = src.tree(path)
        if tree is None:
            continue
        for fn in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):

            def visit(
                stmt: ast.stmt, conds: list[str], fn: ast.FunctionDef = fn, path: str = path
            ) -> None:
                if isinstance(stmt, ast.Assign):
                    for t in stmt.targets:
                        via = _assigned_via(t, attr)
                        if via is None:
                            continue
                        found: dict[str, Any] = {
                            "file": path,
                            "function": fn.name,
                            "when": conds,
                            "value": value_or_source(stmt.value),
                        }
                        if via:
                            found["via"] = via
                        out.append(found)

            # Only this function's own statements (nested defs are walked as their own fn).
            walk_paths([s for s in fn.body if not isinstance(s, ast.FunctionDef)], visit, [])
    out.sort(key=lambda d: json.dumps(d, sort_keys=True))
    return out


# ----------------------------------------------------------------------------- environment


def _env_declarations(src: Sources) -> dict[str, dict[str, Any]]:
    """SGLANG_* variables declared in sglang/srt/environ.py (class Envs) with type and default."""
    tree = src.tree(ENVIRON)
    out: dict[str, dict[str, Any]] = {}
    if tree is None:
        return out
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        for stmt in cls.body:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                tgt, val = stmt.targets[0], stmt.value
            elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
                tgt, val = stmt.target, stmt.value
            else:
                continue
            if not (isinstance(tgt, ast.Name) and tgt.id.startswith("SGLANG_")):
                continue
            if isinstance(val, ast.Call):
                out[tgt.id] = {
                    "declared_in": ENVIRON,
                    "type": call_name(val),
                    "default": value_or_source(val.args[0]) if val.args else None,
                }
    return out


def _env_reads(tree: ast.Module, path: str, scopes: set[str] | None) -> dict[str, list[dict]]:
    """Reads of SGLANG_* variables in a module: get_*_env_var("X", d), os.getenv, envs.X.

    `scopes`: only inside these top-level defs/classes, plus module-level statements whose
    assigned global is used in one of them (None: the whole module).
    """
    wanted: list[tuple[str, ast.AST]] = []
    if scopes is None:
        wanted = [("<module>", tree)]
    else:
        defs = top_defs(tree)
        used: set[str] = set()
        for name in scopes:
            if name in defs:
                wanted.append((name, defs[name]))
                used |= {n.id for n in ast.walk(defs[name]) if isinstance(n, ast.Name)}
        for stmt in tree.body:
            if isinstance(stmt, ast.Assign):
                tgts = {t.id for t in stmt.targets if isinstance(t, ast.Name)}
                if tgts & used:
                    wanted.append(("<module:" + ",".join(sorted(tgts)) + ">", stmt))
    out: dict[str, list[dict]] = {}
    for scope, root in wanted:
        for n in ast.walk(root):
            hit: tuple[str, Any] | None = None
            if isinstance(n, ast.Call) and n.args:
                first = literal(n.args[0])
                if isinstance(first, str) and ENV_RE.fullmatch(first):
                    d = n.args[1] if len(n.args) > 1 else None
                    kw = {k.arg: k.value for k in n.keywords if k.arg}
                    d = d if d is not None else kw.get("default")
                    hit = (first, {"via": call_name(n), "default": value_or_source(d)})
            elif (
                isinstance(n, ast.Attribute)
                and ENV_RE.fullmatch(n.attr)
                and isinstance(n.value, ast.Name)
                and n.value.id == "envs"
            ):
                hit = (n.attr, {"via": "envs"})
            if hit:
                entry = {"file": path, "scope": scope, **hit[1]}
                lst = out.setdefault(hit[0], [])
                if entry not in lst:
                    lst.append(entry)
    return out


# ----------------------------------------------------------------------------- linear GEMM


def _fp4_scopes(tree: ast.Module) -> set[str]:
    """Top-level defs/classes of modelopt_quant.py that are about FP4."""
    return {name for name in top_defs(tree) if FP4_RE.search(name)}


def _gemm_imports(tree: ast.Module, path: str) -> list[dict[str, Any]]:
    """Where mm_fp4 / cutlass_scaled_fp4_mm are imported from, and under which conditions."""
    out: list[dict[str, Any]] = []

    def visit(stmt: ast.stmt, conds: list[str]) -> None:
        if isinstance(stmt, ast.ImportFrom):
            for a in stmt.names:
                if a.name in GEMM_IMPORTS:
                    out.append(
                        {
                            "file": path,
                            "module": stmt.module,
                            "name": a.name,
                            "as": a.asname or a.name,
                            "when": conds,
                        }
                    )

    walk_paths(tree.body, visit, [])
    return out


def _gemm_calls(fn: ast.AST, label: str) -> list[dict[str, Any]]:
    """GEMM calls in a function, each with its `backend=` argument and the path to it."""
    out: list[dict[str, Any]] = []
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return out

    def visit(stmt: ast.stmt, conds: list[str]) -> None:
        for c in calls_in(stmt):
            name = call_name(c)
            if name not in GEMM_NAMES or not isinstance(c.func, ast.Name):
                continue
            kw = {k.arg: k.value for k in c.keywords if k.arg}
            backend: Any = "(no backend argument)"
            if "backend" in kw:
                backend = value_or_source(kw["backend"])
            elif any(k.arg is None for k in c.keywords):
                star = next(k.value for k in c.keywords if k.arg is None)
                backend = {"expr": "**" + ast.unparse(star)}
            out.append({"in": label, "calls": name, "backend": backend, "when": conds})
        if isinstance(stmt, ast.Raise):
            exc = ast.unparse(stmt.exc) if stmt.exc else ""
            out.append({"in": label, "raises": exc, "when": conds})

    walk_paths(fn.body, visit, [])
    return out


def _assign_table(fn: ast.FunctionDef, var: str) -> list[dict[str, Any]]:
    """Every `var = value` in a function with the conditions leading to it, in source order."""
    out: list[dict[str, Any]] = []

    def visit(stmt: ast.stmt, conds: list[str]) -> None:
        if isinstance(stmt, ast.Assign):
            for t in stmt.targets:
                if isinstance(t, ast.Name) and t.id == var:
                    out.append({"when": conds, "value": value_or_source(stmt.value)})

    walk_paths(fn.body, visit, [])
    return out


def _predicates(src: Sources, names: set[str]) -> dict[str, Any]:
    """What the CC predicates used by the order and gates test (utils/common.py).

    `is_sm100_supported = lru_cache(...)(partial(_check_cuda_device_version, majors, cuda))` is
    read as {"cc_majors": [...], "min_cuda": "12.8"}; other forms are hashed and unverified.
    `get_platform().is_X` is mapped through runtime_context.py's alias table.
    """
    aliases: dict[str, str] = {}
    rc = src.tree(RUNTIME_CONTEXT)
    if rc is not None:
        for n in ast.walk(rc):
            if isinstance(n, ast.Dict):
                val = literal(n)
                if (
                    isinstance(val, dict)
                    and all(isinstance(k, str) and isinstance(v, str) for k, v in val.items())
                    and any(v.startswith("is_") and v.endswith("_supported") for v in val.values())
                ):
                    aliases.update(val)
    path = src.first(UTIL_FILES)
    tree = src.tree(path) if path else None
    out: dict[str, Any] = {}
    for name in sorted(names):
        target = aliases.get(name, name)
        info: dict[str, Any] = {"defined_in": path}
        if target != name:
            info["alias_of"] = target
            info["alias_table"] = RUNTIME_CONTEXT
        found = False
        if tree is not None:
            for stmt in tree.body:
                tgts: list[str] = []
                if isinstance(stmt, ast.Assign):
                    for t in stmt.targets:
                        if isinstance(t, ast.Name):
                            tgts.append(t.id)
                if target in tgts:
                    found = True
                    part = next(
                        (
                            c
                            for c in ast.walk(stmt.value)
                            if isinstance(c, ast.Call)
                            and call_name(c) == "partial"
                            and c.args
                            and call_name(c.args[0]) == PREDICATE_PARTIAL
                        ),
                        None,
                    )
                    kw = {k.arg: literal(k.value) for k in part.keywords} if part else {}
                    if part and isinstance(kw.get("device_capability_majors"), list):
                        cuda = kw.get("cuda_version")
                        info["cc_majors"] = kw["device_capability_majors"]
                        info["min_cuda"] = ".".join(map(str, cuda)) if cuda else None
                    else:
                        info["source_sha256_16"] = digest(ast.unparse(stmt))
                        info["unverified"] = "not a partial(_check_cuda_device_version, ...)"
                elif isinstance(stmt, ast.FunctionDef) and stmt.name == target:
                    found = True
                    info["source_sha256_16"] = digest(ast.unparse(stmt))
                    info["unverified"] = "a function body, not a literal CC list"
        if not found:
            info["unverified"] = "definition not found in utils"
        out[name] = info
    return out


def _predicate_names(exprs: Iterable[str]) -> set[str]:
    names: set[str] = set()
    for e in exprs:
        names |= set(re.findall(r"\b(is_(?:sm\d+\w*|blackwell\w*|hopper\w*))\b", e))
    return names


def linear(src: Sources) -> dict[str, Any]:
    """The dense NVFP4 linear GEMM: knobs, import fallbacks, dispatch, auto order, CC gates."""
    out: dict[str, Any] = {}
    tree = src.tree(MODELOPT)
    if tree is None:
        return {"unverified": f"{MODELOPT} missing or unparsable"}
    defs = top_defs(tree)
    out["gemm_imports"] = _gemm_imports(tree, MODELOPT)
    # The module-level fp4_gemm dispatcher (0.5.8+) or ModelOptFp4LinearMethod.apply.
    calls: list[dict[str, Any]] = []
    hashes: dict[str, str] = {}
    for name in sorted(defs):
        if "fp4_gemm" in name and "fake" not in name and isinstance(defs[name], ast.FunctionDef):
            calls += _gemm_calls(defs[name], f"modelopt_quant.{name}")
            hashes[f"modelopt_quant.{name}"] = digest(ast.unparse(defs[name]))
    lin = defs.get("ModelOptFp4LinearMethod")
    gates: list[dict[str, Any]] = []
    if isinstance(lin, ast.ClassDef):
        for m in lin.body:
            if isinstance(m, ast.FunctionDef) and m.name in (
                "apply",
                "process_weights_after_loading",
                "create_weights",
            ):
                label = f"ModelOptFp4LinearMethod.{m.name}"
                hashes[label] = digest(ast.unparse(m))
                for c in _gemm_calls(m, label):
                    if "raises" in c:
                        gates.append(c)
                    elif m.name == "apply":
                        calls.append(c)
    out["dispatch"] = calls
    out["gates"] = gates
    out["source_sha256_16"] = dict(sorted(hashes.items()))
    cfg = defs.get("ModelOptFp4Config")
    if isinstance(cfg, ast.ClassDef):
        for m in cfg.body:
            if isinstance(m, ast.FunctionDef) and m.name == "get_min_capability":
                rets = [literal(r.value) for r in ast.walk(m) if isinstance(r, ast.Return)]
                out["min_capability"] = (
                    rets[0] if len(rets) == 1 else {"unverified": "not one literal return"}
                )
    # fp4_utils: the backend enum and the auto order (0.5.8+).
    ft = src.tree(FP4_UTILS)
    if ft is not None:
        fdefs = top_defs(ft)
        enum = fdefs.get("Fp4GemmRunnerBackend")
        if isinstance(enum, ast.ClassDef):
            out["backend_enum"] = sorted(
                v
                for s in enum.body
                if isinstance(s, ast.Assign) and isinstance((v := literal(s.value)), str)
            )
        init = fdefs.get("initialize_fp4_gemm_config")
        if isinstance(init, ast.FunctionDef):
            out["initialize_fp4_gemm_config"] = {
                "file": FP4_UTILS,
                "source_sha256_16": digest(ast.unparse(init)),
                "backend_assignments": _assign_table(init, "backend"),
            }
    # Derived, each from the structures above.
    out["derived"] = _derive_linear(out)
    # Any SM103-only (CC 10.3) rule in the order, the dispatch or the gates?
    texts = [ast.unparse(defs[n]) for n in defs if "fp4_gemm" in n and "fake" not in n]
    if isinstance(lin, ast.ClassDef):
        texts.append(ast.unparse(lin))
    if ft is not None and "initialize_fp4_gemm_config" in top_defs(ft):
        texts.append(ast.unparse(top_defs(ft)["initialize_fp4_gemm_config"]))
    sm103 = re.compile(r"sm_?103|\(10, 3\)|== 103\b|minor == 3", re.IGNORECASE)
    out["derived"]["sm103_specific_lines"] = sorted(
        {ln.strip() for t in texts for ln in t.splitlines() if sm103.search(ln)}
    )
    preds = _predicate_names(
        [w for c in out["dispatch"] + out["gates"] for w in c["when"]]
        + [
            w
            for a in out.get("initialize_fp4_gemm_config", {}).get("backend_assignments", [])
            for w in a["when"]
        ]
        + [w for i in out["gemm_imports"] for w in i["when"]]
    )
    out["predicates"] = _predicates(src, preds)
    # SGLang's own JIT CUTLASS kernel module and its CC gate.
    jit = [i["module"] for i in out["gemm_imports"] if i["name"] == "cutlass_scaled_fp4_mm"]
    for mod in sorted(set(jit)):
        if mod and not mod.startswith("sgl_kernel"):
            out.setdefault("sglang_kernel_modules", {})[mod] = _jit_gate(src, mod)
    return out


def _jit_gate(src: Sources, module: str) -> dict[str, Any]:
    """The raise statements (and their conditions) in SGLang's JIT NVFP4 module."""
    path = module.replace(".", "/") + ".py"
    tree = src.tree(path)
    if tree is None:
        return {"file": path, "unverified": "module not in the wheel"}
    raises: list[dict[str, Any]] = []

    def visit(stmt: ast.stmt, conds: list[str]) -> None:
        if isinstance(stmt, ast.Raise) and stmt.exc is not None:
            raises.append({"raises": ast.unparse(stmt.exc), "when": conds})

    for fn in (n for n in tree.body if isinstance(n, ast.FunctionDef)):
        if "arch" in fn.name or "capab" in fn.name:
            walk_paths(fn.body, visit, [f"in {fn.name}"])
    return {"file": path, "raises": raises}


def _derive_linear(lin: dict[str, Any]) -> dict[str, Any]:
    """Summary facts computed (not guessed) from the extracted structures."""
    d: dict[str, Any] = {}
    imps = lin.get("gemm_imports", [])
    fi = [i for i in imps if i["name"] == "mm_fp4" and (i["module"] or "").startswith("flashinfer")]
    d["uses_flashinfer_mm_fp4"] = bool(fi)
    own = sorted({i["module"] for i in imps if i["name"] == "cutlass_scaled_fp4_mm"})
    d["sglang_cutlass_fp4_kernel_from"] = own
    kinds = []
    for m in own:
        kinds.append("sgl-kernel package" if m.startswith("sgl_kernel") else "JIT (" + m + ")")
    d["sglang_cutlass_fp4_kernel_kind"] = kinds
    # What runs when `from flashinfer import mm_fp4` fails.
    fallback: list[str] = []
    fi_labels = {
        f"except ImportError[{w[len('try[') : -1]}]"
        for i in fi
        for w in i["when"]
        if w.startswith("try[")
    }
    absent = ("not enable_flashinfer_fp4_gemm", "not (enable_flashinfer_fp4_gemm)")
    for i in imps:
        if i["name"] == "cutlass_scaled_fp4_mm" and any(w in fi_labels for w in i["when"]):
            fallback.append(f"{i['module']}.cutlass_scaled_fp4_mm bound as {i['as']}")
    for c in lin.get("dispatch", []):
        if "calls" in c and any(a in w for a in absent for w in c["when"]):
            fallback.append(f"{c['in']} calls {c['calls']} when FlashInfer is absent")
        if "raises" in c and any(a in w for a in absent for w in c["when"]):
            fallback.append(f"{c['in']} raises when FlashInfer is absent: {c['raises']}")
    if not fi:
        fallback = [
            f"FlashInfer mm_fp4 not imported: always {m}.cutlass_scaled_fp4_mm" for m in own
        ]
    d["without_flashinfer"] = sorted(set(fallback)) or ["(no fallback found)"]
    # Backend values passed to FlashInfer at the call sites.
    d["backend_arguments"] = sorted(
        {json.dumps(c["backend"], sort_keys=True) for c in lin.get("dispatch", []) if "calls" in c}
    )
    d["native_gate_messages"] = sorted(
        {
            g["raises"]
            for g in lin.get("gates", [])
            if re.search(r"SM1\d\d|Blackwell|compute capability", g["raises"], re.I)
        }
    )
    init = lin.get("initialize_fp4_gemm_config")
    if init:
        is_auto = re.compile(r"backend == ['\"]auto['\"]")
        auto: list[dict[str, Any]] = []
        env: list[dict[str, Any]] = []
        for a in init["backend_assignments"]:
            conds = a["when"]
            if isinstance(a["value"], str) and any(is_auto.fullmatch(c) for c in conds):
                rest = [c for c in conds if not is_auto.fullmatch(c)]
                auto.append({"when": rest, "backend": a["value"]})
            elif any("envs." in c or "environ" in c for c in conds):
                env.append(a)
        d["auto_order"] = auto or [
            {
                "backend": "auto",
                "when": [],
                "note": "no assignment under backend == 'auto': the value 'auto' is kept and "
                "passed to flashinfer.mm_fp4 through get_flashinfer_backend()",
            }
        ]
        d["env_overrides_flag"] = env
    return d


def ct_linear(src: Sources) -> dict[str, Any]:
    """Compressed-tensors (and other non-ModelOpt) FP4 linear schemes: GEMM entry and gates."""
    out: dict[str, Any] = {}
    for path in src.fp4_scheme_files():
        tree = src.tree(path)
        if tree is None or "moe" in path.rsplit("/", 1)[-1]:
            continue
        imported = sorted(
            a.name
            for n in tree.body
            if isinstance(n, ast.ImportFrom) and (n.module or "").endswith("modelopt_quant")
            for a in n.names
        )
        for name, node in top_defs(tree).items():
            if not (isinstance(node, ast.ClassDef) and FP4_RE.search(name)):
                continue
            if "moe" in name.lower() or "mxfp4" in name.lower():
                continue
            entry: dict[str, Any] = {
                "imports_from_modelopt_quant": imported,
                "source_sha256_16": digest(ast.unparse(node)),
                "gemm_calls": [],
                "raises": [],
            }
            for m in node.body:
                if not isinstance(m, ast.FunctionDef):
                    continue
                if m.name == "get_min_capability":
                    rets = [literal(r.value) for r in ast.walk(m) if isinstance(r, ast.Return)]
                    entry["min_capability"] = rets[0] if len(rets) == 1 else None

                def visit(
                    stmt: ast.stmt,
                    conds: list[str],
                    m: ast.FunctionDef = m,
                    entry: dict[str, Any] = entry,
                ) -> None:
                    for c in calls_in(stmt):
                        text = ast.unparse(c.func)
                        if text.split(".")[-1] in GEMM_NAMES:
                            entry["gemm_calls"].append({"in": m.name, "calls": text, "when": conds})
                    if isinstance(stmt, ast.Raise) and stmt.exc is not None:
                        entry["raises"].append(
                            {"in": m.name, "raises": ast.unparse(stmt.exc), "when": conds}
                        )

                walk_paths(m.body, visit, [])
            if entry["gemm_calls"] or "min_capability" in entry:
                out[f"{path}::{name}"] = entry
    return out


# ----------------------------------------------------------------------------- sgl-kernel

_KERNEL_SIGS: dict[str, dict[str, Any]] = {}
_KERNEL_LOCK = threading.Lock()
_KERNEL_RELEASES: dict[str, Release] | None = None


def sgl_kernel_signature(version: str) -> dict[str, Any]:
    """Parameters of cutlass_scaled_fp4_mm in the sgl-kernel wheel of `version` (read, cached).

    Tells whether SGLang's call with `backend=` can reach sgl-kernel's function at all.
    """
    global _KERNEL_RELEASES
    with _KERNEL_LOCK:
        if version in _KERNEL_SIGS:
            return _KERNEL_SIGS[version]
        if _KERNEL_RELEASES is None:
            _KERNEL_RELEASES = {r.version: r for r in releases("sgl-kernel")}
        rel = _KERNEL_RELEASES.get(version)
    if rel is None:
        out: dict[str, Any] = {"unverified": f"sgl-kernel {version} has no wheel on PyPI"}
    else:
        wheel = Wheel(rel)
        out = {"wheel": rel.wheel_name, "unverified": "cutlass_scaled_fp4_mm not found"}
        pys = sorted(n for n in wheel.names() if n.startswith("sgl_kernel/") and n.endswith(".py"))
        for path in pys:
            text = wheel.text(path) or ""
            if "def cutlass_scaled_fp4_mm" not in text:
                continue
            tree = parse(text)
            nodes = ast.walk(tree) if tree is not None else iter(())
            fn = next(
                (
                    n
                    for n in nodes
                    if isinstance(n, ast.FunctionDef) and n.name == "cutlass_scaled_fp4_mm"
                ),
                None,
            )
            if fn is not None:
                a = fn.args
                out = {
                    "wheel": rel.wheel_name,
                    "file": path,
                    "params": [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs],
                    "var_keyword": a.kwarg.arg if a.kwarg else None,
                }
                out["accepts_backend"] = "backend" in out["params"] or a.kwarg is not None
                break
    with _KERNEL_LOCK:
        _KERNEL_SIGS[version] = out
    return out


def _pinned(reqs: dict[str, Any], name: str) -> str | None:
    """The exact `name==X` version a release pins (any extra), or None."""
    for spec in reqs.get(name, []) if isinstance(reqs, dict) else []:
        m = re.match(rf"{re.escape(name)}==([^;\s]+)", spec)
        if m:
            return m.group(1)
    return None


# ----------------------------------------------------------------------------- MoE


def moe(src: Sources, flags: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """MoE runner backends: the CLI, the enum, and those NVFP4 MoE methods branch on."""
    out: dict[str, Any] = {}
    flag = flags.get("--moe-runner-backend")
    out["moe_runner_backend_flag"] = flag
    out["legacy_flags"] = sorted(
        f for f in flags if re.fullmatch(r"--enable-flashinfer-[a-z0-9-]*moe[a-z0-9-]*", f)
    )
    mt = src.tree(MOE_UTILS)
    if mt is not None:
        enum = top_defs(mt).get("MoeRunnerBackend")
        if isinstance(enum, ast.ClassDef):
            out["moe_runner_backend_enum"] = sorted(
                v
                for s in enum.body
                if isinstance(s, ast.Assign) and isinstance((v := literal(s.value)), str)
            )
    methods: dict[str, Any] = {}
    for path in [MODELOPT, *src.fp4_scheme_files()]:
        tree = src.tree(path)
        if tree is None:
            continue
        for name, node in top_defs(tree).items():
            if not (isinstance(node, ast.ClassDef) and NVFP4_RE.search(name)):
                continue
            if "moe" not in name.lower():
                continue
            preds: set[str] = set()
            raises: list[dict[str, Any]] = []
            for n in ast.walk(node):
                if isinstance(n, ast.Call):
                    cn = call_name(n)
                    if cn and MOE_PRED_RE.fullmatch(cn):
                        preds.add(cn[3:])
                if isinstance(n, ast.Attribute) and MOE_FLAG_RE.fullmatch(n.attr):
                    preds.add(n.attr)
                if (
                    isinstance(n, ast.Constant)
                    and isinstance(n.value, str)
                    and MOE_FLAG_RE.fullmatch(n.value)
                ):
                    preds.add(n.value)

            for m in node.body:
                if isinstance(m, ast.FunctionDef):

                    def visit(
                        stmt: ast.stmt,
                        conds: list[str],
                        m: ast.FunctionDef = m,
                        raises: list[dict[str, Any]] = raises,
                    ) -> None:
                        if isinstance(stmt, ast.Raise) and stmt.exc is not None:
                            exc = ast.unparse(stmt.exc)
                            raises.append({"in": m.name, "raises": exc, "when": conds})

                    walk_paths(m.body, visit, [])
            kernels = sorted(
                {
                    ast.unparse(n.func)
                    for n in ast.walk(node)
                    if isinstance(n, ast.Call)
                    and re.search(r"moe|fp4|gemm", (call_name(n) or ""), re.IGNORECASE)
                    and not (call_name(n) or "").startswith(("is_", "get_", "enable_"))
                }
            )
            methods[f"{path}::{name}"] = {
                "branches_on": sorted(preds),
                "calls": kernels,
                "raises": raises,
                "source_sha256_16": digest(ast.unparse(node)),
            }
    out["nvfp4_moe_methods"] = methods
    out["fp4_rewrites_of_moe_runner_backend"] = [
        a
        for a in _assignments_to(src, "moe_runner_backend")
        if any(NVFP4_RE.search(w) for w in a["when"])
    ]
    return out


# ----------------------------------------------------------------------------- per release


def extract(release: Release) -> dict[str, Any]:
    """Everything recorded for one release."""
    src = Sources(Wheel(release))
    rec: dict[str, Any] = {"wheel": release.wheel_name, "yanked": release.yanked}
    rec["requires"] = requirements(src)
    flags = _arg_fields(src)
    fp4_flag = flags.get("--fp4-gemm-backend")
    rec["fp4_gemm_backend_flag"] = fp4_flag
    if fp4_flag:
        rec["fp4_gemm_backend_flag"] = {
            **fp4_flag,
            "rewrites": _assignments_to(src, "fp4_gemm_runner_backend"),
        }
    rec["linear"] = linear(src)
    own = rec["linear"].get("derived", {}).get("sglang_cutlass_fp4_kernel_from", [])
    if any(m.startswith("sgl_kernel") for m in own):
        pin = _pinned(rec["requires"], "sgl-kernel")
        rec["linear"]["sgl_kernel_cutlass_scaled_fp4_mm"] = (
            {"pinned": pin, **sgl_kernel_signature(pin)}
            if pin
            else {"unverified": "no exact sgl-kernel pin in Requires-Dist"}
        )
        sig = rec["linear"]["sgl_kernel_cutlass_scaled_fp4_mm"]
        bound = {
            i["as"]
            for i in rec["linear"]["gemm_imports"]
            if i["name"] == "cutlass_scaled_fp4_mm" and i["module"].startswith("sgl_kernel")
        }
        risky = [
            {"in": c["in"], "calls": c["calls"], "backend": c["backend"], "when": c["when"]}
            for c in rec["linear"]["dispatch"]
            if c.get("calls") in bound
            and c["backend"] != "(no backend argument)"
            and not any(w == "enable_flashinfer_fp4_gemm" or "try[" in w for w in c["when"])
        ]
        rec["linear"]["derived"]["backend_kwarg_reaches_sgl_kernel"] = {
            "calls": risky,
            "sgl_kernel_accepts_backend": sig.get("accepts_backend"),
        }
    rec["compressed_tensors_linear"] = ct_linear(src)
    # Environment variables: FP4 in the name anywhere read, or read inside FP4 code.
    decl = _env_declarations(src)
    reads: dict[str, list[dict]] = {}
    mt = src.tree(MODELOPT)
    sources: list[tuple[str, ast.Module | None, set[str] | None]] = [
        (MODELOPT, mt, _fp4_scopes(mt) if mt else None),
        (FP4_UTILS, src.tree(FP4_UTILS), None),
    ]
    sources += [(p, src.tree(p), None) for p in src.fp4_scheme_files() if p != CT_MOE]
    cmoe = CT_MOE
    ct = src.tree(cmoe)
    if ct is not None:
        sources.append((cmoe, ct, _fp4_scopes(ct)))
    for path, tree, scopes in sources:
        if tree is None:
            continue
        for k, v in _env_reads(tree, path, scopes).items():
            reads.setdefault(k, []).extend(v)
    for path in src.arg_files():
        tree = src.tree(path)
        if tree is not None:
            for k, v in _env_reads(tree, path, None).items():
                if FP4_RE.search(k):
                    reads.setdefault(k, []).extend(v)
    names = set(reads) | {k for k in decl if FP4_RE.search(k)}
    env: dict[str, Any] = {}
    for k in sorted(names):
        env[k] = {
            "declared": decl.get(k),
            "read_in": sorted(reads.get(k, []), key=lambda d: json.dumps(d, sort_keys=True)),
            "fp4_in_name": bool(FP4_RE.search(k)),
        }
    rec["env"] = env
    rec["moe"] = moe(src, flags)
    rec["files_read"] = sorted(src._text)
    return rec


def is_nvfp4_release(release: Release) -> bool:
    """Whether this release's modelopt_quant.py defines an FP4 class (ModelOptFp4Config)."""
    src = Sources(Wheel(release))
    tree = src.tree(MODELOPT)
    return tree is not None and any(
        isinstance(n, ast.ClassDef) and FP4_RE.search(n.name) for n in tree.body
    )


def with_retries(fn: Callable[[Release], Any], release: Release) -> Any:
    """Call fn, retrying transient network errors (wheels.py does not retry)."""
    for attempt in range(RETRIES):
        try:
            return fn(release)
        except (urllib.error.URLError, TimeoutError, ConnectionError, OSError):
            if attempt == RETRIES - 1:
                raise
            time.sleep(2**attempt)
    raise AssertionError("unreachable")


# ----------------------------------------------------------------------------- boundaries


def summary(rec: dict[str, Any]) -> dict[str, Any]:
    """The fields boundaries are computed over (a flat view of one release)."""
    lin = rec["linear"].get("derived", {})
    flag = rec.get("fp4_gemm_backend_flag") or {}
    moe_flag = rec["moe"].get("moe_runner_backend_flag") or {}
    methods = rec["moe"].get("nvfp4_moe_methods", {})
    reach = lin.get("backend_kwarg_reaches_sgl_kernel") or {}
    return {
        "--fp4-gemm-backend choices": (flag.get("choices") or {}).get("values"),
        "--fp4-gemm-backend default": flag.get("default"),
        "fp4 auto order": lin.get("auto_order"),
        "flashinfer mm_fp4 used": lin.get("uses_flashinfer_mm_fp4"),
        "own cutlass fp4 kernel": lin.get("sglang_cutlass_fp4_kernel_kind"),
        "without flashinfer": lin.get("without_flashinfer"),
        "backend= at call sites": lin.get("backend_arguments"),
        "native CC gate": lin.get("native_gate_messages"),
        "backend= reaches sgl-kernel without FlashInfer": [
            *[c["backend"] for c in reach.get("calls", [])],
            reach.get("sgl_kernel_accepts_backend"),
        ],
        "fp4 env overrides flag": lin.get("env_overrides_flag"),
        "SM103-specific lines": lin.get("sm103_specific_lines"),
        "ModelOptFp4Config min capability": rec["linear"].get("min_capability"),
        "CC predicates": {
            k: [v.get("cc_majors"), v.get("min_cuda")]
            for k, v in rec["linear"].get("predicates", {}).items()
        },
        "compressed-tensors FP4 linear": {
            k.split("::")[-1]: [
                v.get("min_capability"),
                sorted({c["calls"] for c in v["gemm_calls"]}),
            ]
            for k, v in rec.get("compressed_tensors_linear", {}).items()
        },
        "NVFP4 MoE CC gates": sorted(
            {
                r["raises"]
                for m in methods.values()
                for r in m["raises"]
                if re.search(r"SM1\d\d|Blackwell|capabilit", r["raises"], re.I)
            }
        ),
        "FP4 env vars": sorted(rec["env"]),
        "env defaults": {
            k: (v["declared"] or {}).get("default")
            if v["declared"]
            else sorted({json.dumps(r.get("default")) for r in v["read_in"] if "default" in r})
            for k, v in rec["env"].items()
        },
        "--moe-runner-backend choices": (moe_flag.get("choices") or {}).get("values"),
        "--moe-runner-backend default": moe_flag.get("default"),
        "legacy MoE flags": rec["moe"].get("legacy_flags"),
        "NVFP4 MoE branches on": sorted({b for m in methods.values() for b in m["branches_on"]}),
        "requires": rec["requires"],
    }


def boundaries(data: dict[str, Any]) -> list[tuple[str, str, Any, Any]]:
    """(version, field, old, new) wherever a summary field changes from the previous release."""
    out: list[tuple[str, str, Any, Any]] = []
    prev: dict[str, Any] | None = None
    for v in data["covers"]:
        cur = summary(data["releases"][v])
        if prev is not None:
            for k in cur:
                if json.dumps(cur[k], sort_keys=True) != json.dumps(prev[k], sort_keys=True):
                    out.append((v, k, prev[k], cur[k]))
        prev = cur
    return out


# ----------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    """Read every release from the first NVFP4 one and write data/sglang.json."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--boundaries", action="store_true", help="print where each field changes")
    ap.add_argument("--only", nargs="*", help="extract just these versions (no file written)")
    args = ap.parse_args(argv)
    started = time.monotonic()
    rels = [r for r in releases(PROJECT) if Version(r.version) >= FLOOR]
    if args.only:
        rels = [r for r in rels if r.version in set(args.only)]
    with ThreadPoolExecutor(WORKERS) as ex:
        nvfp4 = list(ex.map(lambda r: with_retries(is_nvfp4_release, r), rels))
    first = next((i for i, ok in enumerate(nvfp4) if ok), None)
    if first is None:
        print("no NVFP4 release found", file=sys.stderr)
        return 1
    todo = rels[first:]
    with ThreadPoolExecutor(WORKERS) as ex:
        recs = list(ex.map(lambda r: with_retries(extract, r), todo))
    data = {
        "project": PROJECT,
        "extracted_by": "tools/extract/sglang.py",
        "covers": [r.version for r in todo],
        "releases": {r.version: rec for r, rec in zip(todo, recs, strict=True)},
    }
    text = json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    if args.only:
        print(text)
    else:
        OUT.parent.mkdir(parents=True, exist_ok=True)
        OUT.write_text(text, encoding="utf-8")
        print(f"wrote {OUT} ({len(todo)} releases, {todo[0].version} .. {todo[-1].version})")
    if args.boundaries:
        for v, k, old, new in boundaries(data):
            old_s, new_s = json.dumps(old, sort_keys=True), json.dumps(new, sort_keys=True)
            print(f"{v}\t{k}\t{old_s}\t->\t{new_s}")
    print(f"took {time.monotonic() - started:.1f}s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
