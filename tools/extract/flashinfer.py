"""Extract FlashInfer's NVFP4 facts from every released flashinfer-python, by program.

Run from the repository root:  python3 tools/extract/flashinfer.py  [--only VERSION ...]

For each release on PyPI this reads the Python sources (from the wheel through
tools/extract/wheels.py; releases before 0.5.0 ship only an sdist, which is downloaded whole and
cached next to the wheel members) and writes tools/extract/data/flashinfer.json:

* ``mm_fp4``: the backends of ``flashinfer.mm_fp4``, each backend's compute-capability gate
  (``@supported_compute_capability`` on the requirement function; inline checks and the JIT
  targets of the modules before 0.5.0), cuDNN / CUDA / CuTe-DSL gates, the default backend,
  what ``backend="auto"`` picks per compute capability, and whether an unknown backend raises.
* ``moe``: the FP4 MoE entry points (``trtllm_fp4_block_scale_moe``, ``cutlass_fused_moe``,
  the CuTe-DSL MoE functions) with their compute-capability gates.
* ``packaging``: the version checks between flashinfer-python and flashinfer-cubin /
  flashinfer-jit-cache, and the dependency pins of the release.
* ``jit``: the nvcc arch flag sets and the minimum CUDA per target arch of the JIT.

Everything is read with ``ast``; where a value cannot be read by program it is null with an
``unverified`` note. Maintainer tooling: not part of the installed package.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import re
import sys
import tarfile
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

sys.path.insert(0, str(Path(__file__).resolve().parent))
from wheels import CACHE, TIMEOUT, Release, Wheel, releases

PROJECT = "flashinfer-python"
INDEX = f"https://pypi.org/pypi/{PROJECT}/json"
OUT = Path(__file__).resolve().parent / "data" / "flashinfer.json"
CCS = (100, 103, 107, 110, 120, 121)  # the FP4-capable targets the auto table is evaluated on
CUDA_STEPS = ("12.6", "12.8", "12.9", "13.0", "13.1")
JIT_ARCHS = ((10, 0), (10, 3), (10, 7), (11, 0), (12, 0), (12, 1))
MOE_NAMES = ("trtllm_fp4_block_scale_moe", "cutlass_fused_moe")
# The trtllm-gen batched-GEMM cubins behind trtllm_fp4_block_scale_moe: the architectures each
# module variant may dispatch to (0.6.18rc10+), and the runner's own arch check (C++ source).
TRTLLM_METAINFO = "flashinfer/jit/trtllm_gen_metainfo.py"
TRTLLM_RUNNER = "csrc/trtllm_batched_gemm_runner.cu"

Json = dict[str, Any]


# ----------------------------------------------------------------------------------------------
# Reading sources: wheels (range requests, wheels.py) and sdists (whole file, cached)
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Dist:
    """One release and the file its sources are read from."""

    version: str
    kind: str  # "wheel" or "sdist"
    filename: str
    url: str
    size: int
    yanked: bool


class Source:
    """The ``flashinfer/...`` Python files (and metadata) of one release, by package path."""

    def __init__(self, dist: Dist) -> None:
        self.dist = dist
        self._wheel: Wheel | None = None
        self._files: dict[str, bytes] | None = None
        self._cache: dict[str, str | None] = {}
        if dist.kind == "wheel":
            self._wheel = Wheel(
                Release(PROJECT, dist.version, dist.url, dist.filename, dist.size, dist.yanked)
            )

    def _sdist(self) -> dict[str, bytes]:
        if self._files is None:
            path = CACHE / PROJECT / "sdist" / self.dist.filename
            if not path.is_file():
                with urllib.request.urlopen(self.dist.url, timeout=TIMEOUT) as r:
                    data = r.read()
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
            files: dict[str, bytes] = {}
            with tarfile.open(path) as tar:
                for m in tar.getmembers():
                    parts = m.name.split("/", 1)
                    if not m.isfile() or len(parts) < 2:
                        continue
                    rel = parts[1]
                    if (
                        (rel.startswith("flashinfer/") and rel.endswith(".py"))
                        or rel in ("PKG-INFO", "pyproject.toml", "requirements.txt")
                        or rel.endswith(TRTLLM_RUNNER)
                    ):
                        f = tar.extractfile(m)
                        if f is not None:
                            files[rel] = f.read()
            self._files = files
        return self._files

    def names(self) -> list[str]:
        """Every member path (package-relative for sdists)."""
        if self._wheel is not None:
            return self._wheel.names()
        return sorted(self._sdist())

    def text(self, member: str) -> str | None:
        """One member as text, or None."""
        if member not in self._cache:
            if self._wheel is not None:
                self._cache[member] = self._wheel.text(member)
            else:
                raw = self._sdist().get(member)
                self._cache[member] = None if raw is None else raw.decode("utf-8", "replace")
        return self._cache[member]

    def metadata(self) -> str | None:
        """The core metadata (METADATA of the wheel, PKG-INFO of the sdist)."""
        if self._wheel is not None:
            meta = [n for n in self.names() if n.endswith(".dist-info/METADATA")]
            return self.text(meta[0]) if meta else None
        return self.text("PKG-INFO")

    def py(self, prefix: str) -> list[str]:
        """Python members under ``prefix``."""
        return [n for n in self.names() if n.startswith(prefix) and n.endswith(".py")]


def all_dists() -> list[Dist]:
    """Every release of flashinfer-python with a wheel (wheels.py) or, failing that, an sdist."""
    out: dict[str, Dist] = {}
    for r in releases(PROJECT):
        out[r.version] = Dist(r.version, "wheel", r.wheel_name, r.wheel_url, r.size, r.yanked)
    with urllib.request.urlopen(INDEX, timeout=TIMEOUT) as resp:
        data = json.load(resp)
    for version, files in data["releases"].items():
        try:
            Version(version)
        except InvalidVersion:
            continue
        if version in out:
            continue
        sd = [f for f in files if f["packagetype"] == "sdist"]
        if sd:
            f = sd[0]
            url = urllib.parse.urljoin(INDEX, f["url"])
            out[version] = Dist(
                version, "sdist", f["filename"], url, int(f["size"]), bool(f.get("yanked"))
            )
    return sorted(out.values(), key=lambda d: Version(d.version))


# ----------------------------------------------------------------------------------------------
# AST helpers
# ----------------------------------------------------------------------------------------------


class Module:
    """A parsed source file with lookups of its top-level names."""

    def __init__(self, path: str, text: str) -> None:
        self.path, self.text = path, text
        self.tree = ast.parse(text)
        self._lines: list[str] | None = None
        self.funcs: dict[str, ast.FunctionDef] = {}
        self.consts: dict[str, ast.expr] = {}
        self.imports: dict[str, tuple[str, int, str]] = {}  # name -> (module, level, orig)
        for node in self.tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.funcs[node.name] = node  # type: ignore[assignment]
            elif isinstance(node, ast.Assign):
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        self.consts[t.id] = node.value
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                if node.value is not None:
                    self.consts[node.target.id] = node.value
            elif isinstance(node, ast.ImportFrom):
                for a in node.names:
                    self.imports[a.asname or a.name] = (node.module or "", node.level, a.name)

    def seg(self, node: ast.AST) -> str:
        """The source lines of ``node`` (whole lines: enough for statements and functions)."""
        if self._lines is None:
            self._lines = self.text.splitlines(keepends=True)
        start, end = getattr(node, "lineno", None), getattr(node, "end_lineno", None)
        if start is None or end is None:
            return ast.unparse(node)
        return "".join(self._lines[start - 1 : end])

    def line(self, node: ast.AST) -> str:
        return f"{self.path}:{getattr(node, 'lineno', 0)}"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def call_name(node: ast.AST) -> str | None:
    """``f`` for ``f(...)`` and ``x.f(...)``."""
    if isinstance(node, ast.Call):
        if isinstance(node.func, ast.Name):
            return node.func.id
        if isinstance(node.func, ast.Attribute):
            return node.func.attr
    return None


def int_list(node: ast.AST | None) -> list[int] | None:
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        vals = [
            e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, int)
        ]
        if len(vals) == len(node.elts):
            return sorted(vals)
    return None


def str_list(node: ast.AST | None) -> list[str] | None:
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        vals = [e.value for e in node.elts if isinstance(e, ast.Constant)]
        if len(vals) == len(node.elts) and all(isinstance(v, str) for v in vals):
            return [str(v) for v in vals]
    return None


def decorator_ccs(fn: ast.FunctionDef) -> list[int] | None:
    """The list of ``@supported_compute_capability([...])``, if the function has one."""
    for d in fn.decorator_list:
        if call_name(d) == "supported_compute_capability" and isinstance(d, ast.Call):
            return int_list(d.args[0]) if d.args else None
    return None


def decorator_call(fn: ast.FunctionDef, name: str) -> ast.Call | None:
    for d in fn.decorator_list:
        if isinstance(d, ast.Call) and call_name(d) == name:
            return d
    return None


def calls_in(node: ast.AST) -> set[str]:
    return {n for c in ast.walk(node) if (n := call_name(c))}


def names_in(node: ast.AST) -> set[str]:
    out = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    out |= {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}
    return out


def reach(mod: Module, roots: Iterable[ast.AST], depth: int) -> list[ast.FunctionDef]:
    """Module-level functions called from ``roots``, transitively up to ``depth`` calls."""
    seen: dict[str, ast.FunctionDef] = {}
    frontier = list(roots)
    for _ in range(depth):
        nxt: list[ast.AST] = []
        for node in frontier:
            for name in sorted(calls_in(node)):
                if name in mod.funcs and name not in seen:
                    seen[name] = mod.funcs[name]
                    nxt.append(mod.funcs[name])
        frontier = nxt
    return list(seen.values())


def literal_values(ann: ast.AST | None) -> list[str] | None:
    """The strings of ``Literal[...]`` (possibly inside Optional/Union)."""
    if ann is None:
        return None
    for n in ast.walk(ann):
        if isinstance(n, ast.Subscript) and ast.unparse(n.value).endswith("Literal"):
            sl = n.slice
            elts = sl.elts if isinstance(sl, ast.Tuple) else [sl]
            vals = [e.value for e in elts if isinstance(e, ast.Constant)]
            return [str(v) for v in vals]
    return None


def param(fn: ast.FunctionDef, name: str) -> tuple[ast.arg | None, ast.expr | None]:
    """An argument of ``fn`` and its default."""
    a = fn.args
    pos = a.posonlyargs + a.args
    defaults: list[ast.expr | None] = [None] * (len(pos) - len(a.defaults)) + list(a.defaults)
    for arg, default in zip(pos, defaults, strict=True):
        if arg.arg == name:
            return arg, default
    for arg, kwdefault in zip(a.kwonlyargs, a.kw_defaults, strict=True):
        if arg.arg == name:
            return arg, kwdefault
    return None, None


# ----------------------------------------------------------------------------------------------
# Version / cuDNN / CUDA gates
# ----------------------------------------------------------------------------------------------


def resolve_version(
    node: ast.AST | None, mod: Module, local: dict[str, ast.expr], env: dict[str, bool]
) -> str | None:
    """A CUDA version an expression names: Version("12.9"), a constant, an IfExp on env."""
    if node is None:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, int, float)):
        return str(node.value)
    if isinstance(node, ast.Call) and call_name(node) == "Version" and node.args:
        return resolve_version(node.args[0], mod, local, env)
    if isinstance(node, ast.Name):
        if node.id in local:
            return resolve_version(local[node.id], mod, {}, env)
        if node.id in mod.consts:
            return resolve_version(mod.consts[node.id], mod, {}, env)
    if isinstance(node, ast.IfExp) and isinstance(node.test, ast.Name) and node.test.id in env:
        branch = node.body if env[node.test.id] else node.orelse
        return resolve_version(branch, mod, local, env)
    return None


def cuda_checks(fn: ast.FunctionDef, mod: Module) -> list[Json]:
    """Raises guarded by a CUDA-version comparison, with the minimum for NVFP4 resolved."""
    local = {
        t.id: n.value
        for n in ast.walk(fn)
        if isinstance(n, ast.Assign)
        for t in n.targets
        if isinstance(t, ast.Name)
    }
    out: list[Json] = []
    for node in ast.walk(fn):
        if not isinstance(node, ast.If) or not any(isinstance(s, ast.Raise) for s in node.body):
            continue
        test = node.test
        text = ast.unparse(test)
        if "cuda" not in text.lower() or "cudnn" in text.lower():
            continue
        minimum: str | None = None
        if isinstance(test, ast.Compare) and len(test.ops) == 1:
            left, op, right = test.left, test.ops[0], test.comparators[0]
            if isinstance(op, ast.Lt):
                if isinstance(left, ast.Attribute) and left.attr == "major":
                    v = resolve_version(right, mod, local, {"use_nvfp4": True})
                    minimum = f"{v}.0" if v and "." not in v else v
                else:
                    minimum = resolve_version(right, mod, local, {"use_nvfp4": True})
        elif isinstance(test, ast.UnaryOp) and isinstance(test.operand, ast.Compare):
            cmp = test.operand
            if isinstance(cmp.ops[0], ast.GtE):
                v = resolve_version(cmp.comparators[0], mod, local, {"use_nvfp4": True})
                if isinstance(cmp.left, ast.Attribute) and cmp.left.attr == "major" and v:
                    v = f"{v}.0" if "." not in v else v
                minimum = v
        out.append({"at": mod.line(node), "if": text, "min_cuda_nvfp4": minimum})
    return out


def cudnn_gates(fns: Iterable[ast.FunctionDef], mod: Module) -> Json:
    """cudnn-frontend version floors and backend_version() comparisons in ``fns``."""
    frontend: set[str] = set()
    backend: list[Json] = []
    for fn in fns:
        text = mod.seg(fn)
        for node in ast.walk(fn):
            if not isinstance(node, ast.Compare) or len(node.ops) != 1:
                continue
            left, right = node.left, node.comparators[0]
            lt = ast.unparse(left)
            if (
                "backend_version" in lt
                and isinstance(right, ast.Constant)
                and isinstance(right.value, int)
            ):
                op = type(node.ops[0]).__name__
                backend.append({"fn": fn.name, "cmp": f"{op} {right.value}"})
            elif "cudnn.__version__" in text and isinstance(right, ast.Tuple):
                nums = [
                    e.value
                    for e in right.elts
                    if isinstance(e, ast.Constant) and isinstance(e.value, int)
                ]
                if nums and len(nums) == len(right.elts) and isinstance(left, ast.Tuple):
                    frontend.add(".".join(str(x) for x in nums))
            elif (
                "cudnn.__version__" in text
                and "version" in lt
                and isinstance(right, ast.Call)
                and call_name(right) == "Version"
            ):
                v = resolve_version(right, mod, {}, {})
                if v:
                    frontend.add(v)
    backend.sort(key=lambda d: (d["fn"], d["cmp"]))
    uniq = [dict(t) for t in dict.fromkeys(tuple(sorted(d.items())) for d in backend)]
    return {"frontend_min": sorted(frontend) or None, "backend_version_checks": uniq}


CUTE_MARKERS = ("_check_cute_dsl_availability", "is_cute_dsl_available", "CUTE_DSL_AVAILABLE")
CC_MARKERS = (
    "_match_sm_version",
    "get_compute_capability",
    "get_device_capability",
    "is_sm",
    "major",
    "minor",
    "device_arch",
    "_check_cute_dsl_arch",
    "is_sm100a",
    "is_sm120a",
    "is_sm90a",
)


def inline_cc(fn: ast.AST, mod: Module) -> list[str]:
    """``if`` tests in ``fn`` that look at the compute capability."""
    out: list[str] = []
    for node in ast.walk(fn):
        if isinstance(node, (ast.If, ast.IfExp)):
            text = ast.unparse(node.test)
            if any(m in text for m in CC_MARKERS):
                out.append(text)
    return sorted(set(out))


# ----------------------------------------------------------------------------------------------
# JIT targets of module builders
# ----------------------------------------------------------------------------------------------

FLAG_RE = re.compile(r"^sm(\d+)([af]?)_nvcc_flags$")


class Package:
    """Lazily parsed modules of one release."""

    def __init__(self, src: Source) -> None:
        self.src = src
        self._mods: dict[str, Module | None] = {}

    def mod(self, path: str) -> Module | None:
        if path not in self._mods:
            text = self.src.text(path)
            try:
                self._mods[path] = None if text is None else Module(path, text)
            except SyntaxError:
                self._mods[path] = None
        return self._mods[path]

    def find_def(self, name: str, prefixes: Iterable[str]) -> tuple[Module, ast.FunctionDef] | None:
        for prefix in prefixes:
            for path in sorted(self.src.py(prefix)):
                text = self.src.text(path) or ""
                if f"def {name}(" not in text:
                    continue
                m = self.mod(path)
                if m and name in m.funcs:
                    return m, m.funcs[name]
        return None


JIT_CALL_RE = re.compile(r"(^gen_|module|nvcc|_flags|build_inputs|get_.*_spec)")


def _own_targets(node: ast.AST) -> tuple[set[str], set[int]]:
    """Arch flag names and supported_major_versions written directly in ``node``."""
    flags: set[str] = set()
    majors: set[int] = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and FLAG_RE.match(n.id):
            flags.add(n.id)
        if isinstance(n, ast.keyword) and n.arg == "supported_major_versions":
            majors.update(int_list(n.value) or [])
        if isinstance(n, ast.Constant) and isinstance(n.value, str):
            for a in re.findall(r"compute_(\d+[af]?)", n.value):
                flags.add(f"sm{a}_nvcc_flags")
    return flags, majors


def _archs(flags: Iterable[str]) -> list[str]:
    return sorted({f"sm_{g.group(1)}{g.group(2)}" for f in flags if (g := FLAG_RE.match(f))})


def jit_targets(pkg: Package, mod: Module, roots: Iterable[ast.AST]) -> Json:
    """The JIT module builders ``roots`` reach and the nvcc archs each one compiles for.

    Follows calls named gen_*/…module…/get_*_spec up to four calls deep (in the module and in
    flashinfer/jit/); a builder is listed when its own body names arch flags
    (``sm100a_nvcc_flags``, ``compute_100a``) or ``supported_major_versions``.
    """
    builders: Json = {}
    root_flags: set[str] = set()
    root_majors: set[int] = set()
    for r in roots:
        f, mj = _own_targets(r)
        root_flags |= f
        root_majors |= mj
    todo: list[tuple[Module, ast.AST, int]] = [(mod, r, 0) for r in roots]
    seen: set[tuple[str, str]] = set()
    while todo:
        m, node, depth = todo.pop()
        if depth >= 4:
            continue
        for name in sorted(calls_in(node)):
            if not JIT_CALL_RE.search(name) or (m.path, name) in seen:
                continue
            seen.add((m.path, name))
            found = (m, m.funcs[name]) if name in m.funcs else None
            if found is None and name.startswith("gen_"):
                found = pkg.find_def(name, ("flashinfer/jit/",))
            if found is None:
                continue
            fm, fn = found
            flags, majors = _own_targets(fn)
            if flags or majors:
                builders[name] = {
                    "archs": _archs(flags),
                    "supported_major_versions": sorted(majors),
                    "file": fm.path,
                }
            todo.append((fm, fn, depth + 1))
    all_flags = set(root_flags)
    for b in builders.values():
        all_flags |= {f"sm{a[3:]}_nvcc_flags" for a in b["archs"]}
    return {
        "builders": dict(sorted(builders.items())),
        "archs": _archs(all_flags),
        "supported_major_versions": sorted(
            root_majors.union(*(set(b["supported_major_versions"]) for b in builders.values()))
        ),
    }


# ----------------------------------------------------------------------------------------------
# backend="auto": evaluate the heuristic per compute capability
# ----------------------------------------------------------------------------------------------


# The mm_fp4 call the auto table describes: NVFP4, scalar alpha, not batch-invariant.
AUTO_ASSUME = {"use_nvfp4": True, "batch_invariant": False, "_is_per_token_alpha(alpha)": False}


class NeedAtom(Exception):
    def __init__(self, atom: str) -> None:
        self.atom = atom


class Unsupported(Exception):
    pass


class Heuristic:
    """A small evaluator of ``_heuristic_func_mm_fp4`` for one compute capability.

    Comparisons of ``major``/``minor`` are decided; every other test (CUDA version, cuDNN
    version, availability flags, shape/alpha conditions) is an atom whose truth is enumerated.
    """

    def __init__(self, fn: ast.FunctionDef, cc: int, mod: Module) -> None:
        self.fn, self.major, self.minor, self.mod = fn, cc // 10, cc % 10, mod

    def run(self, truth: dict[str, bool]) -> list[str]:
        self.truth = truth
        self.vars: dict[str, Any] = {"major": self.major, "minor": self.minor}
        res = self._block(self.fn.body)
        if res is None:
            raise Unsupported("fell off the end")
        return res

    def _block(self, body: list[ast.stmt]) -> list[str] | None:
        for st in body:
            if isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant):
                continue
            if isinstance(st, ast.Return):
                return self._seq(st.value)
            if isinstance(st, ast.If):
                branch = st.body if self._bool(st.test) else st.orelse
                res = self._block(branch)
                if res is not None:
                    return res
                continue
            if isinstance(st, ast.Assign):
                self._assign(st.targets, st.value)
                continue
            if isinstance(st, ast.AnnAssign):
                if st.value is not None:
                    self._assign([st.target], st.value)
                continue
            raise Unsupported(ast.unparse(st)[:80])
        return None

    def _assign(self, targets: list[ast.expr], value: ast.expr) -> None:
        for t in targets:
            if isinstance(t, ast.Tuple) and ast.unparse(value).startswith(
                ("get_compute_capability", "torch.cuda.get_device_capability")
            ):
                continue  # major, minor = get_compute_capability(...)
            if not isinstance(t, ast.Name):
                raise Unsupported(ast.unparse(t))
            if t.id in ("major", "minor"):
                continue
            if isinstance(value, (ast.Tuple, ast.List)):
                self.vars[t.id] = self._seq(value)  # evaluated now: it may refer to itself
            else:
                self.vars[t.id] = value

    def _seq(self, node: ast.expr | None) -> list[str]:
        if isinstance(node, (ast.Tuple, ast.List)):
            out: list[str] = []
            for e in node.elts:
                if isinstance(e, ast.Constant) and isinstance(e.value, str):
                    out.append(e.value)
                elif isinstance(e, ast.Starred):
                    out.extend(self._seq(e.value))
                else:
                    raise Unsupported(ast.unparse(e))
            return out
        if isinstance(node, ast.Name) and node.id in self.vars:
            val = self.vars[node.id]
            if isinstance(val, list):
                return list(val)
            if isinstance(val, ast.expr):
                return self._seq(val)
        if isinstance(node, ast.ListComp) and len(node.generators) == 1:
            gen = node.generators[0]
            seq = self._seq(gen.iter)
            ok = all(re.fullmatch(r"\w+ in suitable_backends", ast.unparse(c)) for c in gen.ifs)
            if ok:
                return seq  # the filter by suitability is applied by the caller
        raise Unsupported(ast.unparse(node) if node else "None")

    def _bool(self, node: ast.expr) -> bool:
        if isinstance(node, ast.BoolOp):
            vals = node.values
            if isinstance(node.op, ast.And):
                return all(self._bool(v) for v in vals)
            return any(self._bool(v) for v in vals)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return not self._bool(node.operand)
        if isinstance(node, ast.Name) and node.id in self.vars:
            val = self.vars[node.id]
            if isinstance(val, ast.expr):
                return self._bool(val)
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            left, right = node.left, node.comparators[0]
            if isinstance(left, ast.Name) and left.id in ("major", "minor"):
                value = self.vars[left.id]
                if isinstance(right, ast.Constant) and isinstance(right.value, int):
                    return bool(_cmp(node.ops[0], value, right.value))
                if isinstance(node.ops[0], (ast.In, ast.NotIn)) and int_list(right):
                    inside = value in (int_list(right) or [])
                    return inside if isinstance(node.ops[0], ast.In) else not inside
        if isinstance(node, ast.IfExp):
            return self._bool(node.body if self._bool(node.test) else node.orelse)
        if isinstance(node, ast.Name) and node.id in AUTO_ASSUME:
            return AUTO_ASSUME[node.id]
        text = ast.unparse(node)
        if re.search(r"\b(major|minor)\b", text) and "cuda" not in text:
            raise Unsupported(text)
        atom = self._atom(node)
        if atom in AUTO_ASSUME:
            return AUTO_ASSUME[atom]
        if re.fullmatch(r"'[\w-]+' in suitable_backends", atom):
            return True  # the returned order is filtered by suitable_backends anyway
        if atom not in self.truth:
            raise NeedAtom(atom)
        return self.truth[atom]

    def _atom(self, node: ast.expr) -> str:
        """The text of an undecided test, with local names replaced by their definitions."""

        class Sub(ast.NodeTransformer):
            def __init__(self, vars_: dict[str, Any], consts: dict[str, ast.expr]) -> None:
                self.vars_, self.consts = vars_, consts

            def visit_Name(self, n: ast.Name) -> ast.AST:
                val = self.vars_.get(n.id)
                if isinstance(val, ast.expr) and not isinstance(val, (ast.Tuple, ast.List)):
                    result: ast.AST = self.visit(val)
                    return result
                const = self.consts.get(n.id)
                if isinstance(const, ast.Call) and call_name(const) == "Version":
                    return const
                return n

        tree = ast.parse(ast.unparse(node), mode="eval")
        return ast.unparse(Sub(self.vars, self.mod.consts).visit(tree))


def _cmp(op: ast.cmpop, a: int, b: int) -> bool:
    table: dict[type, Callable[[int, int], bool]] = {
        ast.Eq: lambda x, y: x == y,
        ast.NotEq: lambda x, y: x != y,
        ast.Lt: lambda x, y: x < y,
        ast.LtE: lambda x, y: x <= y,
        ast.Gt: lambda x, y: x > y,
        ast.GtE: lambda x, y: x >= y,
    }
    if type(op) not in table:
        raise Unsupported(type(op).__name__)
    return table[type(op)](a, b)


def merge_rows(rows: list[Json]) -> list[Json]:
    """Merge rows with the same order that differ in one test only (that test does not matter)."""
    changed = True
    while changed:
        changed = False
        for i, a in enumerate(rows):
            for b in rows[i + 1 :]:
                if a["order"] != b["order"] or set(a["if"]) != set(b["if"]):
                    continue
                diff = [k for k in a["if"] if a["if"][k] != b["if"][k]]
                if len(diff) == 1:
                    merged = {k: v for k, v in a["if"].items() if k != diff[0]}
                    rows = [r for r in rows if r is not a and r is not b]
                    rows.append({"if": merged, "order": a["order"]})
                    changed = True
                    break
            if changed:
                break
    return sorted(rows, key=lambda r: json.dumps(r["if"], sort_keys=True))


def auto_table(fn: ast.FunctionDef, mod: Module) -> Json:
    """Per CC: each combination of the undecided tests and the candidate order it yields."""
    out: Json = {}
    for cc in CCS:
        rows: list[Json] = []
        stack: list[dict[str, bool]] = [{}]
        while stack:
            truth = stack.pop()
            try:
                order = Heuristic(fn, cc, mod).run(truth)
            except NeedAtom as need:
                stack.append({**truth, need.atom: False})
                stack.append({**truth, need.atom: True})
                continue
            rows.append({"if": dict(sorted(truth.items())), "order": order})
            if len(rows) > 64:
                raise Unsupported("too many branches")
        out[str(cc)] = merge_rows(rows)
    return out


# ----------------------------------------------------------------------------------------------
# mm_fp4
# ----------------------------------------------------------------------------------------------


def backend_branches(fn: ast.FunctionDef) -> tuple[dict[str, list[ast.stmt]], bool | None]:
    """``if backend == "x":`` branches of ``fn`` and whether the chain's final else raises."""
    branches: dict[str, list[ast.stmt]] = {}
    raises: bool | None = None
    for node in ast.walk(fn):
        if not isinstance(node, ast.If):
            continue
        chain = node
        found = False
        while True:
            t = chain.test
            if (
                isinstance(t, ast.Compare)
                and isinstance(t.left, ast.Name)
                and t.left.id == "backend"
                and isinstance(t.ops[0], ast.Eq)
                and isinstance(t.comparators[0], ast.Constant)
            ):
                branches.setdefault(str(t.comparators[0].value), chain.body)
                found = True
            if len(chain.orelse) == 1 and isinstance(chain.orelse[0], ast.If):
                chain = chain.orelse[0]
                continue
            if found and len(branches) > 1:
                raises = bool(chain.orelse) and any(isinstance(s, ast.Raise) for s in chain.orelse)
            break
    return branches, raises


def find_mm_fp4(pkg: Package) -> tuple[Module, ast.FunctionDef] | None:
    for path in ("flashinfer/gemm/gemm_base.py", "flashinfer/gemm.py"):
        m = pkg.mod(path)
        if m and "mm_fp4" in m.funcs:
            return m, m.funcs["mm_fp4"]
    return pkg.find_def("mm_fp4", ("flashinfer/gemm/", "flashinfer/"))


def requirement_fn(
    pkg: Package, mod: Module, node: ast.expr
) -> tuple[Module, ast.FunctionDef] | None:
    if not isinstance(node, ast.Name):
        return None
    if node.id in mod.funcs:
        return mod, mod.funcs[node.id]
    imp = mod.imports.get(node.id)
    if imp:
        found = pkg.find_def(imp[2], ("flashinfer/",))
        if found:
            return found
    return None


def unknown_backend_policy(pkg: Package) -> Json:
    """How ``backend_requirement`` treats a backend outside its table (flashinfer/utils.py)."""
    m = pkg.mod("flashinfer/utils.py")
    if not m or "backend_requirement" not in m.funcs:
        return {"raises": None, "unverified": "backend_requirement not found in utils.py"}
    fn = m.funcs["backend_requirement"]
    raised = sorted(
        {
            call_name(n.exc) or ""
            for n in ast.walk(fn)
            if isinstance(n, ast.Raise) and n.exc is not None
        }
        - {""}
    )
    seg = m.seg(fn)
    if "signature(" in seg:
        read = "signature: defaults and positional backend are seen"
    elif 'kwargs.get("backend")' in seg:
        read = (
            'kwargs.get("backend") only: a backend left at its default or passed '
            "positionally reads as None and is refused"
        )
    else:
        read = None
    return {
        "raises": "BackendSupportedError" in raised,
        "exceptions": raised,
        "backend_read": read,
        "where": "flashinfer/utils.py backend_requirement",
    }


def extract_mm_fp4(pkg: Package) -> Json:
    found = find_mm_fp4(pkg)
    if not found:
        return {"present": False}
    mod, fn = found
    arg, default = param(fn, "backend")
    literal = literal_values(arg.annotation if arg else None)
    out: Json = {
        "present": True,
        "file": mod.path,
        "at": mod.line(fn),
        "backend_literal": literal,
        "default_backend": default.value if isinstance(default, ast.Constant) else None,
    }
    deco = decorator_call(fn, "backend_requirement")
    table: dict[str, ast.expr] = {}
    heur_name: str | None = None
    common_name: str | None = None
    if deco is not None and deco.args and isinstance(deco.args[0], ast.Dict):
        for k, v in zip(deco.args[0].keys, deco.args[0].values, strict=True):
            if isinstance(k, ast.Constant):
                table[str(k.value)] = v
        for kw in deco.keywords:
            if kw.arg == "heuristic_func" and isinstance(kw.value, ast.Name):
                heur_name = kw.value.id
            if kw.arg == "common_check" and isinstance(kw.value, ast.Name):
                common_name = kw.value.id
    out["requirement_table"] = bool(table)
    out["common_check"] = common_name
    branches, else_raises = backend_branches(fn)
    if table:
        out["unknown_backend"] = unknown_backend_policy(pkg)
    else:
        out["unknown_backend"] = {
            "raises": bool(else_raises),
            "where": f"{mod.path} mm_fp4 if/elif on backend"
            + ("" if else_raises else ": no else branch, the output is returned unwritten"),
        }
    backends: Json = {}
    names = list(table) + [b for b in (literal or []) if b not in table and b != "auto"]
    names += [b for b in branches if b not in names and b != "auto"]
    for b in names:
        entry: Json = {}
        req = requirement_fn(pkg, mod, table[b]) if b in table else None
        if b in table:
            entry["requirement_fn"] = ast.unparse(table[b])
        if req:
            rmod, rfn = req
            entry["requirement_file"] = rmod.path
            entry["cc"] = decorator_ccs(rfn)
            entry["at"] = rmod.line(rfn)
            entry["cc_source"] = "decorator" if entry["cc"] is not None else None
            if entry["cc"] is None:
                entry["unverified"] = "requirement function has no @supported_compute_capability"
            entry["inline_cc_checks"] = inline_cc(rfn, rmod)
            reached = [rfn, *reach(rmod, [rfn], 3)]
            entry["cuda_checks"] = [c for f in reached for c in cuda_checks(f, rmod)]
            entry["cudnn"] = cudnn_gates(reached, rmod) if b == "cudnn" else None
            entry["needs_cute_dsl"] = any(
                any(mk in names_in(f) for mk in CUTE_MARKERS) for f in reached
            )
        elif b in table:
            entry["cc"] = None
            entry["unverified"] = f"requirement function {ast.unparse(table[b])} not resolved"
        if b in branches:
            body = ast.Module(body=branches[b], type_ignores=[])
            reached = reach(mod, [body], 2)
            if not table:
                entry["cc"] = None
                entry["cc_source"] = None
                entry["unverified"] = (
                    "no compute-capability table before the requirement functions; "
                    "see inline_cc_checks, excluded_cc and jit"
                )
                entry["inline_cc_checks"] = inline_cc(body, mod)
                entry["cuda_checks"] = [c for f in reached for c in cuda_checks(f, mod)]
                entry["cudnn"] = cudnn_gates(reached, mod) if b == "cudnn" else None
                entry["needs_cute_dsl"] = any(
                    any(mk in names_in(f) for mk in CUTE_MARKERS) for f in [body, *reached]
                )
            entry["jit"] = jit_targets(pkg, mod, [body])
        backends[b] = entry
    # Inline raises of mm_fp4 itself of the form `backend == "x" and _match_sm_version(..)`.
    for node in ast.walk(fn):
        if not isinstance(node, ast.If) or not any(isinstance(s, ast.Raise) for s in node.body):
            continue
        t = node.test
        if isinstance(t, ast.BoolOp) and isinstance(t.op, ast.And):
            bk = [
                str(v.comparators[0].value)
                for v in t.values
                if isinstance(v, ast.Compare)
                and ast.unparse(v.left) == "backend"
                and isinstance(v.ops[0], ast.Eq)
                and isinstance(v.comparators[0], ast.Constant)
            ]
            sms = [
                int(s)
                for v in t.values
                if call_name(v) == "_match_sm_version" and isinstance(v, ast.Call)
                for s in (str_list(v.args[1]) if len(v.args) > 1 else None) or []
            ]
            for b in bk:
                if b not in backends or not sms:
                    continue
                if len(t.values) == 2:  # `backend == "x" and _match_sm_version(...)`: raise
                    backends[b]["excluded_cc"] = sorted(
                        set(backends[b].get("excluded_cc", [])) | set(sms)
                    )
                else:  # raises only together with other conditions (dtype, cuDNN version)
                    backends[b].setdefault("conditional_cc_raises", []).append(ast.unparse(t))
    if arg is None:
        body = ast.Module(body=fn.body, type_ignores=[])
        reached = reach(mod, [body], 2)
        backends["(no backend argument)"] = {
            "cc": None,
            "unverified": "mm_fp4 has no backend argument in this release; see jit/cudnn",
            "inline_cc_checks": inline_cc(body, mod),
            "cudnn": cudnn_gates(reached, mod),
            "jit": jit_targets(pkg, mod, [body]),
        }
    out["backend_param"] = arg is not None
    out["backends"] = dict(sorted(backends.items()))
    # backend="auto"
    if heur_name and heur_name in mod.funcs:
        hfn = mod.funcs[heur_name]
        text = mod.seg(hfn)
        auto: Json = {
            "heuristic_fn": heur_name,
            "at": mod.line(hfn),
            "source_sha256_16": sha(text),
        }
        try:
            auto["by_cc"] = auto_table(hfn, mod)
            auto["assumed"] = dict(sorted(AUTO_ASSUME.items()))
            auto["verified_by"] = "program"
        except Unsupported as e:
            auto["by_cc"] = None
            auto["verified_by"] = None
            auto["unverified"] = f"heuristic not evaluable by program: {e}"
        out["auto"] = auto
    elif "auto" in (literal or []):
        out["auto"] = {"by_cc": None, "unverified": "auto in Literal but no heuristic_func found"}
    else:
        out["auto"] = None
    return out


# ----------------------------------------------------------------------------------------------
# MoE
# ----------------------------------------------------------------------------------------------


def cutlass_moe_dispatch(mod: Module) -> Json | None:
    """``get_cutlass_fused_moe_module``: which device arch strings build which module."""
    fn = mod.funcs.get("get_cutlass_fused_moe_module")
    if fn is None:
        return None
    out: dict[str, str] = {}
    for node in ast.walk(fn):
        if not isinstance(node, ast.If):
            continue
        t = node.test
        if not (isinstance(t, ast.Compare) and ast.unparse(t.left) == "backend"):
            continue
        archs = str_list(t.comparators[0]) or (
            [str(t.comparators[0].value)] if isinstance(t.comparators[0], ast.Constant) else []
        )
        gen = next((c for c in sorted(calls_in(node.body[0])) if c.startswith("gen_")), None)
        for a in archs:
            out.setdefault(a, gen or "?")
    return dict(sorted(out.items(), key=lambda kv: int(kv[0]) if kv[0].isdigit() else 0))


def moe_entry(pkg: Package, mod: Module, fn: ast.FunctionDef) -> Json:
    e: Json = {"file": mod.path, "at": mod.line(fn), "cc": decorator_ccs(fn)}
    deco = decorator_call(fn, "backend_requirement")
    if deco is not None:
        per: Json = {}
        if deco.args and isinstance(deco.args[0], ast.Dict):
            for k, v in zip(deco.args[0].keys, deco.args[0].values, strict=True):
                r = requirement_fn(pkg, mod, v)
                if isinstance(k, ast.Constant):
                    per[str(k.value)] = decorator_ccs(r[1]) if r else None
        for kw in deco.keywords:
            if kw.arg == "common_check":
                r = requirement_fn(pkg, mod, kw.value)
                per["<common_check>"] = decorator_ccs(r[1]) if r else None
        e["backend_requirement_cc"] = per
    e["inline_cc_checks"] = inline_cc(fn, mod)
    e["jit"] = jit_targets(pkg, mod, [fn])
    e["needs_cute_dsl"] = any(mk in names_in(fn) for mk in CUTE_MARKERS) or "cute_dsl" in mod.path
    if e["cc"] is None and not e.get("backend_requirement_cc"):
        e["cc_source"] = "inline/jit"
        e["unverified"] = (
            "no @supported_compute_capability: the CC gate is whatever inline_cc_checks and "
            "the JIT targets (jit) allow"
        )
    else:
        e["cc_source"] = "decorator"
    if fn.name == "cutlass_fused_moe":
        e["arch_dispatch"] = cutlass_moe_dispatch(mod)
    return e


_ARCH_CASE = re.compile(r"case\s+tg::CudaArch::(\w+)\s*:\s*return\s+([^;]+);")
_SM_EQ = re.compile(r"smVersion\s*==\s*(\d+)")
_ARCH_FILTER = re.compile(r"\bconfig\.mSm\b|\bsm_version\s*==")


def trtllm_cubin_archs(pkg: Package) -> Json:
    """The trtllm-gen cubins trtllm_fp4_block_scale_moe can run, read two ways: the architecture
    tuples FlashInfer declares per module variant (`*_CUBIN_ARCHS` in
    flashinfer/jit/trtllm_gen_metainfo.py, 0.6.18rc10+) and the runner's own check of a cubin's
    architecture against the GPU's SM version (`isArchCompatible` in
    csrc/trtllm_batched_gemm_runner.cu, 0.6.16rc4+; earlier releases filter with inline
    `config.mSm` tests, recorded as source lines, or not at all). The cubins themselves and their
    manifest (flashinferMetaInfo.h) are downloaded at first use: not in the wheel."""
    out: Json = {"declared": None, "runner_accepts": None, "runner_filters": None}
    meta = pkg.mod(TRTLLM_METAINFO)
    if meta is not None:
        declared = {
            name: str_list(value)
            for name, value in sorted(meta.consts.items())
            if name.endswith("_CUBIN_ARCHS")
        }
        out["declared"] = declared or None
    runner = [n for n in pkg.src.names() if n.endswith(TRTLLM_RUNNER)]
    text = pkg.src.text(runner[0]) if runner else None
    if text is None:
        out["unverified"] = f"no {TRTLLM_RUNNER} in this release's distribution"
        return out
    out["runner"] = runner[0]
    body = re.search(r"bool isArchCompatible\([^)]*\)\s*\{(.*?)\n\}", text, re.S)
    if body is not None:
        out["runner_accepts"] = {
            arch: sorted(int(n) for n in _SM_EQ.findall(expr))
            for arch, expr in _ARCH_CASE.findall(body.group(1))
        }
    else:
        lines = [ln.strip() for ln in text.splitlines() if _ARCH_FILTER.search(ln)]
        out["runner_filters"] = lines
        if not lines:
            out["unverified"] = (
                "the runner checks no cubin architecture: every cubin of the downloaded "
                "manifest is tried on the GPU"
            )
    return out


def extract_moe(pkg: Package) -> Json:
    out: Json = {}
    for name in MOE_NAMES:
        found = pkg.find_def(name, ("flashinfer/fused_moe/", "flashinfer/"))
        out[name] = moe_entry(pkg, *found) if found else None
    if out.get("trtllm_fp4_block_scale_moe") is not None:
        out["trtllm_fp4_block_scale_moe"]["cubin_archs"] = trtllm_cubin_archs(pkg)
    # CuTe-DSL MoE entry points: public top-level functions named cute_dsl*moe* under fused_moe
    for path in sorted(pkg.src.py("flashinfer/fused_moe/")):
        text = pkg.src.text(path) or ""
        if "def cute_dsl" not in text and "moe" not in path:
            continue
        if not re.search(r"def cute_dsl\w*moe\w*\(|def \w*moe\w*cute_dsl\w*\(", text):
            continue
        m = pkg.mod(path)
        if not m:
            continue
        for name, fn in sorted(m.funcs.items()):
            if name.startswith("_") or "cute_dsl" not in name or "moe" not in name:
                continue
            if any(w in name for w in ("normalize", "validate", "interleave", "workspace")):
                continue
            out[name] = moe_entry(pkg, m, fn)
    return out


# ----------------------------------------------------------------------------------------------
# Packaging and JIT
# ----------------------------------------------------------------------------------------------


CATCH_ALL = {"Exception", "BaseException", "RuntimeError"}


def _swallows(node: ast.Try) -> bool:
    """A ``try`` with a handler that catches RuntimeError and does not raise again."""
    for h in node.handlers:
        caught = names_in(h.type) if h.type is not None else CATCH_ALL
        if caught & CATCH_ALL and not any(isinstance(n, ast.Raise) for n in ast.walk(h)):
            return True
    return False


def _uncaught(node: ast.AST) -> Iterator[ast.AST]:
    """The nodes under ``node`` that run outside a swallowing ``try`` (nested defs excluded)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        if isinstance(child, ast.Try) and _swallows(child):
            for part in (*child.handlers, *child.orelse, *child.finalbody):
                yield part
                yield from _uncaught(part)
            continue
        yield child
        yield from _uncaught(child)


def escapes(mod: Module, fn: ast.FunctionDef, depth: int) -> bool:
    """Whether an exception raised in ``fn``, or in a module function it calls (``depth`` calls
    deep), leaves ``fn``: a ``raise`` or call outside a ``try`` that swallows it. From 0.7.2
    `_get_cubin_dir` calls `_check_cubin_version` (which raises) inside a try that logs and
    ignores the mismatched wheel."""
    for n in _uncaught(fn):
        if isinstance(n, ast.Raise):
            return True
        name = call_name(n)
        callee = mod.funcs.get(name or "")
        if depth and callee is not None and callee is not fn and escapes(mod, callee, depth - 1):
            return True
    return False


def version_checks(pkg: Package) -> Json:
    """Checks comparing flashinfer-cubin / flashinfer-jit-cache versions with flashinfer's."""
    out: Json = {}
    for pkgname, mod_name in (
        ("flashinfer-cubin", "flashinfer_cubin"),
        ("flashinfer-jit-cache", "flashinfer_jit_cache"),
    ):
        hits: list[Json] = []
        for path in sorted(pkg.src.py("flashinfer/")):
            if not path.startswith(("flashinfer/jit/", "flashinfer/__init__", "flashinfer/utils")):
                continue
            text = pkg.src.text(path) or ""
            if mod_name not in text or "__version__" not in text:
                continue
            m = pkg.mod(path)
            if not m:
                continue
            for fname, fn in m.funcs.items():
                seg = m.seg(fn)
                if mod_name not in seg or "__version__" not in seg:
                    continue
                checks = [fn, *reach(m, [fn], 2)]
                cmps: list[str] = []
                bypass: set[str] = set()
                for f in checks:
                    for n in ast.walk(f):
                        if isinstance(n, ast.Compare) and "flashinfer_version" in ast.unparse(n):
                            cmps.append(ast.unparse(n))
                        if call_name(n) == "startswith" and "version" in ast.unparse(n):
                            cmps.append(ast.unparse(n))
                        if isinstance(n, ast.Constant) and isinstance(n.value, str):
                            bypass.update(re.findall(r"FLASHINFER_\w*VERSION\w*", n.value))
                raises = escapes(m, fn, 3)
                if not cmps:
                    continue
                import_time = any(
                    isinstance(st, (ast.Assign, ast.AnnAssign, ast.Expr)) and fname in calls_in(st)
                    for st in m.tree.body
                )
                kind = "exact"
                joined = " ".join(cmps)
                if "startswith(f'{flashinfer_version}+')" in joined.replace('"', "'"):
                    kind = "exact or exact+local (e.g. +cu129)"
                elif "startswith(flashinfer_version)" in joined:
                    kind = "prefix (startswith)"
                hits.append(
                    {
                        "where": f"{path} {fname}",
                        "compares": sorted(set(cmps)),
                        "kind": kind,
                        "raises": raises,
                        "import_time": import_time,
                        "bypass_env": sorted(bypass),
                    }
                )
        out[pkgname] = hits or None
    return out


REQ_KEYS = (
    "nvidia-cutlass-dsl",
    "nvidia-cudnn-frontend",
    "nvidia-cudnn-cu12",
    "nvidia-cudnn-cu13",
    "flashinfer-cubin",
    "flashinfer-jit-cache",
    "torch",
    "apache-tvm-ffi",
    "cuda-python",
)


def requires(src: Source) -> Json:
    meta = src.metadata() or ""
    out: dict[str, list[str]] = {}
    for line in meta.splitlines():
        if not line.startswith("Requires-Dist:"):
            continue
        spec = line.split(":", 1)[1].strip()
        name = re.split(r"[\s<>=!~;\[(]", spec, maxsplit=1)[0].lower().replace("_", "-")
        if name in REQ_KEYS:
            out.setdefault(name, []).append(spec)
    return {k: sorted(v) for k, v in sorted(out.items())} if meta else {"unverified": "no metadata"}


def normalize_arch_table(pkg: Package) -> Json:
    """Run CompilationContext._normalize_cuda_arch per arch and CUDA version, if it exists.

    The function is pure (it asks ``is_cuda_version_at_least``); it is executed with that
    function replaced, its imports removed and no other names available.
    """
    m = pkg.mod("flashinfer/compilation_context.py")
    if not m:
        return {"by_arch": None, "unverified": "no flashinfer/compilation_context.py"}
    fn: ast.FunctionDef | None = None
    for node in ast.walk(m.tree):
        if isinstance(node, ast.FunctionDef) and node.name == "_normalize_cuda_arch":
            fn = node
    if fn is None:
        return {
            "by_arch": None,
            "unverified": "no _normalize_cuda_arch: no CUDA version check on the target arch "
            "(nvcc itself rejects archs it does not know)",
        }

    class Strip(ast.NodeTransformer):
        def visit_ImportFrom(self, node: ast.ImportFrom) -> ast.AST:
            return ast.Pass()

        def visit_Import(self, node: ast.Import) -> ast.AST:
            return ast.Pass()

    clean = Strip().visit(ast.parse(ast.unparse(fn)))
    clean.body[0].decorator_list = []
    code = compile(ast.fix_missing_locations(clean), m.path, "exec")
    out: Json = {}
    for major, minor in JIT_ARCHS:
        row: Json = {}
        first_ok: str | None = None
        for cuda in CUDA_STEPS:
            ns: dict[str, Any] = {
                "__builtins__": {"RuntimeError": RuntimeError, "str": str, "int": int},
                "is_cuda_version_at_least": lambda v, c=cuda: Version(c) >= Version(v),
            }
            exec(code, ns)  # a pure upstream helper, see the docstring
            try:
                res = ns["_normalize_cuda_arch"](major, minor)
                row[cuda] = f"{res[0]}{res[1]}"
                first_ok = first_ok or cuda
            except RuntimeError as e:
                row[cuda] = f"error: {e}"
        out[f"{major}.{minor}"] = {"min_cuda": first_ok, "arch_by_cuda": row}
    return {"by_arch": out, "where": f"{m.path} {fn.name}", "verified_by": "program"}


def jit_info(pkg: Package) -> Json:
    core = pkg.mod("flashinfer/jit/core.py")
    flags = sorted(
        {
            f"sm_{g.group(1)}{g.group(2)}"
            for name in (core.consts if core else {})
            if (g := FLAG_RE.match(name))
        },
        key=lambda s: (int(re.sub(r"\D", "", s)), s),
    )
    checks: list[Json] = []
    files = ["flashinfer/compilation_context.py", *sorted(pkg.src.py("flashinfer/jit/"))]
    for path in files:
        if "/attention/" in path or "/gemm/cutlass/" in path:
            continue
        m = pkg.mod(path)
        if not m:
            continue
        for node in ast.walk(m.tree):
            if isinstance(node, ast.Call) and call_name(node) == "is_cuda_version_at_least":
                checks.append({"at": m.path, "call": ast.unparse(node)})
            if isinstance(node, ast.Raise) and node.exc is not None:
                msg = ast.unparse(node.exc)
                if re.search(r"CUDA\s*(>=|version)?\s*\d+\.\d+|requires CUDA", msg):
                    checks.append({"at": m.path, "raise": msg[:200]})
    uniq = [dict(t) for t in dict.fromkeys(tuple(sorted(c.items())) for c in checks)]
    return {
        "nvcc_flag_archs": flags,
        "cuda_version_checks": sorted(uniq, key=lambda c: json.dumps(c, sort_keys=True)),
        "normalize_cuda_arch": normalize_arch_table(pkg),
    }


# ----------------------------------------------------------------------------------------------
# Driver
# ----------------------------------------------------------------------------------------------


def extract(dist: Dist) -> Json:
    src = Source(dist)
    pkg = Package(src)
    return {
        "source": {"kind": dist.kind, "file": dist.filename},
        "yanked": dist.yanked,
        "mm_fp4": extract_mm_fp4(pkg),
        "moe": extract_moe(pkg),
        "packaging": {"version_checks": version_checks(pkg), "requires_dist": requires(src)},
        "jit": jit_info(pkg),
    }


def dump(doc: Json) -> str:
    """Sorted keys, one line per release (releases in version order)."""
    head = {k: v for k, v in doc.items() if k != "releases"}
    lines = ["{"]
    for k in sorted(head):
        lines.append(f"{json.dumps(k)}: {json.dumps(head[k], sort_keys=True)},")
    lines.append('"releases": {')
    items = list(doc["releases"].items())
    for i, (v, rel) in enumerate(items):
        sep = "," if i < len(items) - 1 else ""
        lines.append(f"{json.dumps(v)}: {json.dumps(rel, sort_keys=True)}{sep}")
    lines.append("}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def iter_dists(only: list[str] | None) -> Iterator[Dist]:
    for d in all_dists():
        if not only or d.version in only:
            yield d


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", help="extract these versions only (no file written)")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    t0 = time.monotonic()
    doc: Json = {
        "project": PROJECT,
        "extracted_by": "tools/extract/flashinfer.py",
        "covers": [],
        "releases": {},
    }
    for d in iter_dists(args.only):
        print(f"{d.version} ({d.kind})", file=sys.stderr, flush=True)
        doc["releases"][d.version] = extract(d)
        doc["covers"].append(d.version)
    if args.only:
        print(json.dumps(doc["releases"], indent=1, sort_keys=True))
    else:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(dump(doc))
        print(
            f"wrote {args.out} ({len(doc['covers'])} releases, {time.monotonic() - t0:.0f}s)",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
