"""Every flag each vLLM and SGLang release's server parser accepts, read from the released wheels.

    python3 tools/extract/flags.py                 # writes profiles/flags/vllm.json, sglang.json
    python3 tools/extract/flags.py --only vllm==0.34.0   # print one release, write nothing

The releases are those the extracted release data covers (`covers` of tools/extract/data/
vllm.json and sglang.json, the releases the profiles cover). Per release the program reads the
parser's source out of the wheel (HTTP range requests through `wheels.py`), walks it with `ast`
and records every option string the `vllm serve` / `sglang.launch_server` parser registers:
its `dest`, how many words it takes (`nargs`: 0 for a switch, with the value it stores in
`const`) and, for the FP4-relevant options (FP4_DESTS), their `choices`. fp4doctor.command reads
the result (profiles/flags/) to refuse what the release's own parser refuses.

vLLM (vllm/engine/arg_utils.py `EngineArgs.add_cli_args` and `AsyncEngineArgs.add_cli_args`;
vllm/entrypoints/openai/cli_args.py or vllm/entrypoints/common/cli_args.py `make_arg_parser`
and `FrontendArgs`): an `add_argument("--x", **y_kwargs["field"])` takes its kind from the
field's annotation in the config dataclass (vllm/config.py or vllm/config/*.py), as
`get_kwargs` does: a dataclass field takes JSON, `bool` gives `--x`/`--no-x`
(BooleanOptionalAction), a `Literal` gives choices, a list or tuple several words.
SGLang (sglang/srt/server_args.py `ServerArgs.add_cli_args`, sglang/srt/arg_groups/**.py): the
explicit `add_argument` calls, and from 0.5.20 the `A[type, Arg(...)]` fields of
sglang/srt/arg_groups/fields/*.py that `add_cli_args_from_dataclass` turns into `--field-name`.

A release whose parser uses a construct this program does not read is written with
`complete: false` and the reason; fp4doctor then warns about an option it does not know there
instead of refusing it. tests/test_engine.py compares the result with the real parsers of the
releases it installs. Maintainer tooling: not part of the installed package.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from wheels import Release, Wheel, releases

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parent / "data"
OUT = ROOT / "profiles" / "flags"
# The dests whose choices are recorded (fp4doctor.command maps each to a field).
FP4_DESTS = {
    "vllm": {"dtype", "quantization", "linear_backend", "moe_backend", "all2all_backend"},
    "sglang": {
        "dtype",
        "quantization",
        "fp4_gemm_backend",
        "fp4_gemm_runner_backend",
        "moe_runner_backend",
        "moe_a2a_backend",
    },
}
VLLM_FILES = re.compile(
    r"^vllm/(engine/arg_utils\.py|entrypoints/[^/]+/cli_args\.py|"
    r"entrypoints/cli/serve\.py|utils/argparse_utils\.py|utils\.py|utils/__init__\.py|"
    r"config\.py|config/[^/]+\.py|"
    r"model_executor/layers/quantization/__init__\.py)$"
)
SGLANG_FILES = re.compile(
    r"^sglang/srt/(server_args\.py|arg_groups/.+\.py|layers/quantization/__init__\.py|"
    r"server_args_config_parser\.py|utils/server_args_config_parser\.py|"
    r"layers/moe/utils\.py)$"
)
# Files whose add_argument calls build the server parser.
PARSER_FILES = {
    "vllm": (
        "vllm/engine/arg_utils.py",
        "vllm/entrypoints/openai/cli_args.py",
        "vllm/entrypoints/common/cli_args.py",
    ),
    "sglang": ("sglang/srt/server_args.py",),
}
# Functions in those files that build other parsers (not the server's).
NOT_SERVER = {"create_parser_for_docs", "make_arg_parser_for_run_batch", "_create_parser"}


def _runtime_assigns(body: list[ast.stmt]) -> dict[str, ast.AST]:
    out: dict[str, ast.AST] = {}
    for node in body:
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    out[t.id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            if node.value is not None:
                out[node.target.id] = node.value
        elif isinstance(node, ast.If):
            type_checking = "TYPE_CHECKING" in ast.unparse(node.test)
            out.update(_runtime_assigns(node.orelse if type_checking else node.body))
        elif isinstance(node, ast.Try):
            out.update(_runtime_assigns(node.body))
    return out


class Source:
    """The parsed files of one release."""

    def __init__(self, project: str, release: Release) -> None:
        self.project, self.release = project, release
        wheel = Wheel(release)
        pattern = VLLM_FILES if project == "vllm" else SGLANG_FILES
        self.trees: dict[str, ast.Module] = {}
        for name in wheel.names():
            if pattern.match(name) and not name.endswith("/"):
                text = wheel.text(name)
                if text is not None:
                    try:
                        self.trees[name] = ast.parse(text)
                    except SyntaxError:
                        continue
        self.classes: dict[str, ast.ClassDef] = {}
        self.class_path: dict[str, str] = {}
        self.assigns: dict[str, ast.AST] = {}
        # Per module, what a name is bound to when the module runs (an `if TYPE_CHECKING:`
        # import is not: vllm/config/model.py binds QuantizationMethods = str at run time).
        self.runtime: dict[str, dict[str, ast.AST]] = {}
        for path, tree in self.trees.items():
            self.runtime[path] = _runtime_assigns(tree.body)
            for node in tree.body:
                if isinstance(node, ast.ClassDef):
                    self.class_path.setdefault(node.name, path)
        for tree in self.trees.values():
            for node in tree.body:
                if isinstance(node, ast.ClassDef):
                    self.classes.setdefault(node.name, node)
                elif isinstance(node, ast.Assign):
                    for t in node.targets:
                        if isinstance(t, ast.Name):
                            self.assigns.setdefault(t.id, node.value)
                elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                    if node.value is not None:
                        self.assigns.setdefault(node.target.id, node.value)
                elif isinstance(node, ast.TypeAlias) if hasattr(ast, "TypeAlias") else False:
                    self.assigns.setdefault(node.name.id, node.value)  # type: ignore[attr-defined]
        self.unresolved: list[str] = []

    module: str | None = None  # the module whose names an annotation is read in
    parser_module: str | None = None  # the module of the add_argument call being read

    def lookup(self, name: str) -> ast.AST | None:
        """What `name` is bound to: in the module being read first, else anywhere."""
        if self.module is not None and name in self.runtime.get(self.module, {}):
            return self.runtime[self.module][name]
        return self.assigns.get(name)

    def fields(self, cls_name: str) -> dict[str, ast.expr]:
        """A class's annotated fields, its bases' first (a subclass overrides)."""
        cls = self.classes.get(cls_name)
        if cls is None:
            return {}
        out: dict[str, ast.expr] = {}
        for base in cls.bases:
            if isinstance(base, ast.Name):
                out.update(self.fields(base.id))
        for node in cls.body:
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and not node.target.id.startswith("_")
                and "ClassVar" not in ast.unparse(node.annotation)
            ):
                out[node.target.id] = node.annotation
        return out

    # -- literal values ---------------------------------------------------------------------

    def strings(self, node: ast.AST | None, depth: int = 0) -> list[str] | None:
        """The string values a choices expression or a Literal type holds, or None."""
        if node is None or depth > 8:
            return None
        if isinstance(node, ast.Constant):
            if node.value is None:
                return []
            return [str(node.value)] if isinstance(node.value, (str, int)) else None
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            out: list[str] = []
            for elt in node.elts:
                inner = elt.value if isinstance(elt, ast.Starred) else elt
                got = self.strings(inner, depth + 1)
                if got is None:
                    return None
                out += got
            return out
        if isinstance(node, ast.Name):
            bound = self.lookup(node.id)
            if bound is not None:
                return self.strings(bound, depth + 1)
            if node.id in self.classes:  # an Enum: its members' values
                return self.enum_values(self.classes[node.id])
            return None
        if isinstance(node, ast.Subscript):
            head = ast.unparse(node.value)
            if head.endswith("Literal"):
                return self.strings(node.slice, depth + 1)
            if head.endswith(("Optional", "Union", "Annotated")):
                parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
                if head.endswith("Annotated"):
                    parts = parts[:1]
                out = []
                for p in parts:
                    got = self.strings(p, depth + 1)
                    if got is None:
                        return None
                    out += got
                return out
            return None
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.BitOr, ast.Add)):
            left, right = self.strings(node.left, depth + 1), self.strings(node.right, depth + 1)
            return None if left is None or right is None else left + right
        if isinstance(node, ast.Call):
            fn = ast.unparse(node.func)
            if fn in ("get_args", "typing.get_args", "list", "sorted", "tuple") and node.args:
                return self.strings(node.args[0], depth + 1)
        if isinstance(node, ast.ListComp) and len(node.generators) == 1:
            gen = node.generators[0]
            if ast.unparse(node.elt).endswith(".value") and isinstance(gen.iter, ast.Name):
                cls = self.classes.get(gen.iter.id)
                return self.enum_values(cls) if cls else None
        return None

    def enum_values(self, cls: ast.ClassDef) -> list[str] | None:
        out = []
        for node in cls.body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
                out.append(str(node.value.value))
        return out or None


def _is_bool(ann: ast.expr) -> bool:
    return any(isinstance(n, ast.Name) and n.id == "bool" for n in ast.walk(ann))


def _names(ann: ast.expr) -> set[str]:
    return {n.id for n in ast.walk(ann) if isinstance(n, ast.Name)}


def _members(src: Source, ann: ast.expr, depth: int = 0) -> list[ast.expr]:
    """The top-level members of a union annotation (X | Y, Optional[X], Union[X, Y]), type
    aliases to unions followed."""
    if isinstance(ann, ast.BinOp) and isinstance(ann.op, ast.BitOr):
        return _members(src, ann.left, depth) + _members(src, ann.right, depth)
    if isinstance(ann, ast.Subscript):
        head = ast.unparse(ann.value).rsplit(".", 1)[-1]
        if head in ("Optional", "Union"):
            parts = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
            return [m for p in parts for m in _members(src, p, depth)]
        if head in ("Annotated", "SkipValidation"):  # pydantic's SkipValidation[T] is
            # Annotated[T, SkipValidation()]: get_kwargs reads T
            parts = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
            return _members(src, parts[0], depth)
    if isinstance(ann, ast.Constant) and isinstance(ann.value, str):  # a string annotation
        try:
            return _members(src, ast.parse(ann.value, mode="eval").body, depth)
        except SyntaxError:
            return [ann]
    if isinstance(ann, ast.Name) and src.lookup(ann.id) is not None and depth < 4:
        value = src.lookup(ann.id)
        assert value is not None
        text = ast.unparse(value)
        if isinstance(value, (ast.BinOp, ast.Subscript)) and not text.startswith("Literal"):
            return _members(src, value, depth + 1)
    return [ann]


def _head(src: Source, member: ast.expr) -> str:
    if isinstance(member, ast.Constant) and member.value is None:
        return "None"
    node = member.value if isinstance(member, ast.Subscript) else member
    head = ast.unparse(node).rsplit(".", 1)[-1]
    if isinstance(member, ast.Name) and src.lookup(member.id) is not None:
        bound = ast.unparse(src.lookup(member.id))  # type: ignore[arg-type]
        if bound.startswith(("Literal", "typing.Literal")):
            return "Literal"
        if bound in ("str", "int", "bool"):
            return bound
    return head


def _kind_from_annotation(src: Source, ann: ast.expr, get_kwargs_src: str) -> dict[str, Any]:
    """What vLLM's get_kwargs makes of a dataclass field, in its order of tests."""
    heads = {_head(src, m) for m in _members(src, ann)}
    if any(h in src.classes and h.endswith(("Config", "Args")) for h in heads):
        return {"nargs": 1}  # a config dataclass: one JSON word
    if heads == {"bool", "str", "None"} and "{bool, str, type(None)}" in get_kwargs_src:
        return {"nargs": "?", "const": True}
    if "bool" in heads:
        return {"nargs": 0, "negatable": True}
    if "Literal" in heads:
        # literal_to_kwargs: with str also allowed, the values are a metavar, not choices.
        if "str" in heads and "metavar" in get_kwargs_src:
            return {"nargs": 1}
        return {"nargs": 1, "literal": True}
    if heads & {"tuple", "Tuple", "list", "List", "set", "Set"}:
        return {"nargs": "+"}
    return {"nargs": 1}


def _const(node: ast.AST | None) -> Any:
    try:
        return ast.literal_eval(node) if node is not None else None
    except ValueError:
        return None


def _option_spec(
    src: Source, call: ast.Call, kwargs_of: dict[str, str], get_kwargs_src: str
) -> tuple[list[str], dict[str, Any]] | None:
    """The option strings and the spec of one add_argument call (None: a positional)."""
    options = [
        a.value
        for a in call.args
        if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("-")
    ]
    if not options:
        return None
    kw = {k.arg: k.value for k in call.keywords if k.arg}
    spec: dict[str, Any] = {"nargs": 1}
    field_ann: ast.expr | None = None
    for k in call.keywords:
        if k.arg is not None:
            continue
        ref = _field_ref(k.value, kwargs_of)
        if ref is None:
            src.unresolved.append(f"{options[0]}: **{ast.unparse(k.value)[:80]}")
            continue
        cls, key, overrides = ref
        field_ann = src.fields(cls).get(key)
        src.module = src.class_path.get(cls)
        if field_ann is None:
            src.unresolved.append(f"{options[0]}: no field {cls}.{key}")
        else:
            spec = _kind_from_annotation(src, field_ann, get_kwargs_src)
        spec["ref"] = (cls, key)
        kw.update(overrides)
    action = ast.unparse(kw["action"]) if "action" in kw else None
    if action is not None:
        action = action.strip("'\"")
        if action == "store_true":
            spec = {"nargs": 0, "const": True}
        elif action == "store_false":
            spec = {"nargs": 0, "const": False}
        elif action.endswith("BooleanOptionalAction"):
            spec = {"nargs": 0, "negatable": True}
        elif action == "store_const":
            spec = {"nargs": 0, "const": _const(kw.get("const"))}
        elif action in ("append", "extend"):
            spec = {"nargs": 1}
        elif action == "count":
            spec = {"nargs": 0, "const": 1}
        else:
            got = _action_spec(src, kw["action"], "")
            if got is not None:
                got.pop("dest")
                spec = got
        if src.project == "sglang" and action not in ("store", "store_true"):
            spec["action"] = action.rsplit(".", 1)[-1]  # SGLang's --config merger refuses these
    if "nargs" in kw and isinstance(kw["nargs"], ast.Constant) and kw["nargs"].value is None:
        spec["nargs"] = 1  # argparse's default, passed on by the engine's own Action classes
        spec.pop("const", None)
    elif "nargs" in kw:
        n = _const(kw["nargs"])
        spec["nargs"] = n if n is not None else "*"
        if "const" in kw:
            spec["const"] = _const(kw["const"])
    dest = _const(kw.get("dest")) if "dest" in kw else None
    if not dest:
        long = next((o for o in options if o.startswith("--")), options[0])
        dest = long.lstrip("-").replace("-", "_")
    spec["dest"] = dest
    if "choices" in kw:
        spec["choices_node"] = kw["choices"]
    elif spec.pop("literal", False) and field_ann is not None:
        spec["choices_node"] = field_ann
        spec["from_annotation"] = True
    spec.pop("literal", None)
    return options, spec


def _field_ref(
    node: ast.AST, kwargs_of: dict[str, Any]
) -> tuple[str, str, dict[str, ast.expr]] | None:
    """`x_kwargs["field"]`, a name bound to it, or `{**x_kwargs["field"], "k": v}`: the config
    class, the field and the keywords written over it."""
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
        key = _const(node.slice)
        cls = kwargs_of.get(node.value.id)
        if isinstance(cls, str) and isinstance(key, str):
            return cls, key, {}
    if isinstance(node, ast.Name) and isinstance(kwargs_of.get(node.id), tuple):
        cls, key = kwargs_of[node.id]
        return cls, key, {}
    if isinstance(node, ast.Dict):
        found = None
        overrides: dict[str, ast.expr] = {}
        for k, v in zip(node.keys, node.values, strict=True):
            if k is None:
                found = _field_ref(v, kwargs_of)
            elif isinstance(k, ast.Constant) and isinstance(k.value, str):
                overrides[k.value] = v
        if found is not None:
            return found[0], found[1], {**found[2], **overrides}
    return None


def _calls(fn: ast.AST) -> Iterator[tuple[ast.Call, ast.AST | None]]:
    """add_argument calls in `fn`, each with the innermost `for` loop around it."""

    def walk(node: ast.AST, loop: ast.AST | None) -> Iterator[tuple[ast.Call, ast.AST | None]]:
        for child in ast.iter_child_nodes(node):
            inner = child if isinstance(child, ast.For) else loop
            if isinstance(child, ast.Call) and getattr(child.func, "attr", "") == "add_argument":
                yield child, loop
            yield from walk(child, inner)

    yield from walk(fn, None)


def _kwargs_bindings(fn: ast.AST) -> dict[str, Any]:
    """`x_kwargs = get_kwargs(SomeConfig)` names in a function (-> the class), and names bound
    to one of its entries, `v = x_kwargs["field"]` (-> (class, field))."""
    out: dict[str, Any] = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            call = node.value
            if ast.unparse(call.func).endswith("get_kwargs") and call.args:
                arg = call.args[0]
                for t in node.targets:
                    if isinstance(t, ast.Name) and isinstance(arg, ast.Name):
                        out[t.id] = arg.id
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Subscript):
            base = node.value.value
            key = _const(node.value.slice)
            if (
                isinstance(base, ast.Call)
                and ast.unparse(base.func).endswith("get_kwargs")
                and base.args
                and isinstance(base.args[0], ast.Name)
                and isinstance(key, str)
            ):
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        out[t.id] = (base.args[0].id, key)
                continue
            if isinstance(base, ast.Name) and isinstance(out.get(base.id), str):
                for t in node.targets:
                    if isinstance(t, ast.Name) and isinstance(key, str):
                        out[t.id] = (out[base.id], key)
    return out


def _edits(
    src: Source, fn: ast.AST, bindings: dict[str, Any]
) -> dict[tuple[str, str], dict[str, Any]]:
    """What a function changes in get_kwargs' result before registering it:
    `x_kwargs["f"]["choices"].remove(v)` and `v["type"] = lambda s: s.lower().replace("-", "_")`
    (the value is lower-cased and its dashes made underscores before the choices are checked)."""
    out: dict[tuple[str, str], dict[str, Any]] = {}

    def ref(node: ast.AST) -> tuple[str, str] | None:
        got = _field_ref(node, bindings)
        return (got[0], got[1]) if got else None

    for node in ast.walk(fn):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "remove"
            and isinstance(node.func.value, ast.Subscript)
            and _const(node.func.value.slice) == "choices"
        ):
            r = ref(node.func.value.value)
            if r and node.args:
                arg = node.args[0]
                value = _const(arg) if not isinstance(arg, ast.Name) else None
                if isinstance(arg, ast.Name):
                    got = src.strings(arg)
                    value = got[0] if got else None
                out.setdefault(r, {}).setdefault("remove", []).append(value)
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            t = node.targets[0]
            if isinstance(t, ast.Subscript) and _const(t.slice) == "type":
                r = ref(t.value)
                src_text = ast.unparse(node.value)
                if r and ".lower()" in src_text and "replace('-', '_')" in src_text:
                    out.setdefault(r, {})["normalise"] = "lower, - to _"
    return out


def _functions(tree: ast.Module) -> Iterator[tuple[str | None, ast.FunctionDef]]:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            yield None, node
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    yield node.name, item


def vllm_options(src: Source) -> dict[str, dict[str, Any]]:
    """Every option of `vllm serve`'s parser in one release."""
    get_kwargs_src = ""
    arg_utils = src.trees.get("vllm/engine/arg_utils.py")
    if arg_utils is None:
        src.unresolved.append("no vllm/engine/arg_utils.py")
        return {}
    for node in ast.walk(arg_utils):
        if isinstance(node, ast.FunctionDef) and node.name in ("get_kwargs", "_compute_kwargs"):
            get_kwargs_src += ast.unparse(node)
    options: dict[str, dict[str, Any]] = {}
    frontend = _make_arg_parser_module(src)
    if frontend is None:
        src.unresolved.append("no make_arg_parser module found from vllm/entrypoints/cli/serve.py")
    for path in ("vllm/engine/arg_utils.py", *([frontend] if frontend else [])):
        tree = src.trees.get(path)
        if tree is None:
            continue
        src.parser_module = path
        for owner, fn in _functions(tree):
            if fn.name in NOT_SERVER or (
                path.endswith("cli_args.py") and fn.name not in ("make_arg_parser", "add_cli_args")
            ):
                continue
            if path.endswith("arg_utils.py") and fn.name != "add_cli_args":
                continue
            bindings = _kwargs_bindings(fn)
            if owner is not None:
                bindings = {k: owner if v == "cls" else v for k, v in bindings.items()}
            edits = _edits(src, fn, bindings)
            for call, loop in _calls(fn):
                if any(isinstance(a, ast.JoinedStr) for a in call.args):
                    _frontend_loop(src, call, loop, bindings, get_kwargs_src, options)
                    continue
                got = _option_spec(src, call, bindings, get_kwargs_src)
                if got is not None:
                    got[1].update(edits.get(got[1].get("ref"), {}))
                    _add(src, options, *got)
    options["-h"] = options["--help"] = {"dest": "help", "nargs": 0, "const": True}
    serve = src.trees.get("vllm/entrypoints/cli/serve.py")
    if serve is not None:
        for _, fn in _functions(serve):
            if fn.name == "subparser_init":
                for call, _loop in _calls(fn):
                    got = _option_spec(src, call, {}, get_kwargs_src)
                    if got is not None:
                        _add(src, options, *got)
    return options


def _make_arg_parser_module(src: Source) -> str | None:
    """The module `vllm serve` takes make_arg_parser from (serve.py's import): cli_args.py under
    entrypoints/openai/ (to 0.28), entrypoints/launchers/ (0.29-0.32), entrypoints/common/."""
    serve = src.trees.get("vllm/entrypoints/cli/serve.py")
    if serve is not None:
        for node in ast.walk(serve):
            if (
                isinstance(node, ast.ImportFrom)
                and node.module
                and any(a.name == "make_arg_parser" for a in node.names)
            ):
                path = node.module.replace(".", "/") + ".py"
                return path if path in src.trees else None
    present = [p for p in PARSER_FILES["vllm"][1:] if p in src.trees]
    return present[0] if len(present) == 1 else None


def _frontend_loop(
    src: Source,
    call: ast.Call,
    loop: ast.AST | None,
    bindings: dict[str, str],
    get_kwargs_src: str,
    options: dict[str, dict[str, Any]],
) -> None:
    """`for key, value in frontend_kwargs.items(): add_argument(f"--{key...}", **value)`:
    every field of the class get_kwargs was given (FrontendArgs)."""
    if not isinstance(loop, ast.For) or not isinstance(loop.iter, ast.Call):
        src.unresolved.append(f"f-string option outside a loop: {ast.unparse(call)[:80]}")
        return
    base = loop.iter.func.value if isinstance(loop.iter.func, ast.Attribute) else None
    cls = bindings.get(base.id) if isinstance(base, ast.Name) else None
    if "FrontendArgs" in src.classes:  # add_cli_args may live in a base class (get_kwargs(cls))
        cls = "FrontendArgs"
    if cls is None:
        src.unresolved.append(f"frontend loop over {ast.unparse(loop.iter)}")
        return
    fields = src.fields(cls)
    src.module = src.class_path.get(cls)
    extra = _extra_flags(src, cls)
    one_word = _nargs_deleted(src, cls)
    for name, ann in fields.items():
        spec = _kind_from_annotation(src, ann, get_kwargs_src)
        spec["dest"] = name
        if spec.pop("literal", False):
            spec["choices_node"] = ann
            spec["from_annotation"] = True
        if name in one_word:
            spec["nargs"] = 1
        opts = [*extra.get(name, []), f"--{name.replace('_', '-')}"]
        _add(src, options, opts, spec)


def _extra_flags(src: Source, cls: str) -> dict[str, list[str]]:
    """`frontend_kwargs["x"]["flags"] = ["-x"]` in the class's (and its bases') methods."""
    out: dict[str, list[str]] = {}
    seen = [cls]
    node = src.classes.get(cls)
    while node is not None:
        for item in ast.walk(node):
            if isinstance(item, ast.Assign) and len(item.targets) == 1:
                t = item.targets[0]
                if (
                    isinstance(t, ast.Subscript)
                    and _const(t.slice) == "flags"
                    and isinstance(t.value, ast.Subscript)
                ):
                    key = _const(t.value.slice)
                    flags = _const(item.value)
                    if isinstance(key, str) and isinstance(flags, list):
                        out[key] = [str(f) for f in flags]
        base = next((b.id for b in node.bases if isinstance(b, ast.Name)), None)
        if base is None or base in seen:
            break
        seen.append(base)
        node = src.classes.get(base)
    return out


def _nargs_deleted(src: Source, cls: str) -> set[str]:
    """`del frontend_kwargs["x"]["nargs"]` in the class's (and its bases') methods."""
    out: set[str] = set()
    node = src.classes.get(cls)
    seen: list[str] = []
    while node is not None and node.name not in seen:
        seen.append(node.name)
        for item in ast.walk(node):
            if isinstance(item, ast.Delete):
                for t in item.targets:
                    if (
                        isinstance(t, ast.Subscript)
                        and _const(t.slice) == "nargs"
                        and isinstance(t.value, ast.Subscript)
                        and isinstance(_const(t.value.slice), str)
                    ):
                        out.add(_const(t.value.slice))
        base = next((b.id for b in node.bases if isinstance(b, ast.Name)), None)
        node = src.classes.get(base) if base else None
    return out


def _add(
    src: Source, options: dict[str, dict[str, Any]], opts: list[str], spec: dict[str, Any]
) -> None:
    choices_node = spec.pop("choices_node", None)
    negatable = spec.pop("negatable", False)
    remove = spec.pop("remove", [])
    spec.pop("ref", None)
    from_annotation = spec.pop("from_annotation", False)
    if not from_annotation:
        src.module = src.parser_module
    if choices_node is not None and spec["dest"] in FP4_DESTS[src.project]:
        if from_annotation:
            literals = [m for m in _members(src, choices_node) if _head(src, m) == "Literal"]
            got = [src.strings(m) for m in literals]
            choices = None if not got or None in got else [c for g in got for c in g or []]
        else:
            choices = src.strings(choices_node)
        if choices is None:
            src.unresolved.append(f"choices of {opts[0]}: {ast.unparse(choices_node)[:80]}")
        else:
            spec["choices"] = sorted(c for c in dict.fromkeys(choices) if c not in remove)
    if negatable:
        spec = {**spec, "nargs": 0, "const": True}
    enable_disable = src.project == "vllm" and _enable_disable(src)
    for opt in opts:
        options[opt] = dict(spec)
        if negatable and opt.startswith("--"):
            options["--no-" + opt[2:]] = {**spec, "const": False}
            # vllm/utils/argparse_utils.py EnableDisableAction (registered for
            # BooleanOptionalAction): --enable-x also gives --disable-x, and the reverse.
            for prefix, inverse in (("--enable-", "--disable-"), ("--disable-", "--enable-")):
                if enable_disable and opt.startswith(prefix):
                    options[inverse + opt[len(prefix) :]] = {**spec, "const": False}


def _enable_disable(src: Source) -> bool:
    tree = src.trees.get("vllm/utils/argparse_utils.py")
    return (
        tree is not None
        and "EnableDisableAction" in src.classes
        and any(
            "register('action', BooleanOptionalAction, EnableDisableAction)" in ast.unparse(n)
            for n in ast.walk(tree)
            if isinstance(n, ast.Call)
        )
    )


def sglang_options(src: Source) -> dict[str, dict[str, Any]]:
    """Every option of `python -m sglang.launch_server`'s parser in one release."""
    options: dict[str, dict[str, Any]] = {}
    files = [p for p in src.trees if p == "sglang/srt/server_args.py"]
    files += sorted(
        p
        for p in src.trees
        if p.startswith("sglang/srt/arg_groups/")
        and "/fields/" not in p
        and "model_overrides" not in p
    )
    for path in files:
        for _owner, fn in _functions(src.trees[path]):
            if fn.name in NOT_SERVER:
                continue
            for call, _loop in _calls(fn):
                if any(isinstance(a, ast.Starred) for a in call.args):
                    continue  # the generic field loop (add_cli_args_from_dataclass)
                got = _option_spec(src, call, {}, "")
                if got is not None:
                    _add(src, options, *got)
    field_files = ["sglang/srt/server_args.py"] * ("sglang/srt/server_args.py" in src.trees)
    field_files += sorted(p for p in src.trees if p.startswith("sglang/srt/arg_groups/fields/"))
    for path in field_files:
        src.module = path
        for node in src.trees[path].body:
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                        _sglang_field(src, item, options)
    options["-h"] = options["--help"] = {"dest": "help", "nargs": 0, "const": True}
    return options


def _sglang_field(src: Source, item: ast.AnnAssign, options: dict[str, dict[str, Any]]) -> None:
    """One `name: A[type, "help" | Arg(...)] = default` field (0.5.20+), as
    sglang/srt/arg_groups/arg_utils.py add_cli_args_from_dataclass registers it."""
    ann = item.annotation
    if not (isinstance(ann, ast.Subscript) and ast.unparse(ann.value) in ("A", "Annotated")):
        return
    parts = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
    tp = parts[0]
    meta = next(
        (p for p in parts[1:] if isinstance(p, ast.Call) and ast.unparse(p.func) == "Arg"), None
    )
    has_help = any(isinstance(p, ast.Constant) and isinstance(p.value, str) for p in parts[1:])
    if meta is None and not has_help:
        return  # neither Arg(...) nor a help string: not registered from the field
    kw = {k.arg: k.value for k in meta.keywords if k.arg} if meta is not None else {}
    if _const(kw.get("no_cli")) is True:
        return
    name = item.target.id  # type: ignore[union-attr]
    cli = _const(kw.get("cli_name")) or "--" + name.replace("_", "-")
    opts = [cli, *(_const(kw.get("aliases")) or [])]
    members = [m for m in _members(src, tp) if _head(src, m) != "None"]
    heads = {_head(src, m) for m in members}
    spec: dict[str, Any] = {"dest": name, "nargs": 1}
    if "action" in kw:
        spec = _action_spec(src, kw["action"], name) or spec
        action = ast.unparse(kw["action"]).strip("'\"").rsplit(".", 1)[-1]
        if action not in ("store", "store_true"):
            spec["action"] = action
        extra = kw.get("action_kwargs")
        if isinstance(extra, ast.Dict):
            for k, v in zip(extra.keys, extra.values, strict=True):
                if isinstance(k, ast.Constant) and k.value == "nargs":
                    spec["nargs"] = _const(v) or "*"
    elif heads == {"Literal"}:
        spec["choices_node"] = kw.get("choices") or members[0]
    elif heads & {"list", "List"} and "type_parser" not in kw:
        spec["nargs"] = _const(kw.get("nargs")) or "+"
    elif heads == {"bool"}:
        spec = {"dest": name, "nargs": 0, "const": True}
    else:
        if "choices" in kw:
            spec["choices_node"] = kw["choices"]
        if "nargs" in kw:
            spec["nargs"] = _const(kw["nargs"]) or "*"
    _add(src, options, opts, spec)


def _action_spec(src: Source, action_node: ast.expr, dest: str) -> dict[str, Any] | None:
    """argparse's actions, and the engine's own Action classes read from their source
    (one whose __init__ passes nargs=0 is a switch: SGLang's DeprecatedStoreTrueAction)."""
    action = ast.unparse(action_node).strip("'\"")
    if action == "store_true":
        return {"dest": dest, "nargs": 0, "const": True}
    if action == "store_false":
        return {"dest": dest, "nargs": 0, "const": False}
    if action.endswith("BooleanOptionalAction"):
        return {"dest": dest, "nargs": 0, "negatable": True}
    if action in ("append", "extend", "store"):
        return {"dest": dest, "nargs": 1}
    cls = src.classes.get(action.rsplit(".", 1)[-1])
    if cls is not None:
        text = ast.unparse(cls)
        if "nargs=0" in text:
            return {"dest": dest, "nargs": 0, "const": "StoreConst" not in cls.name or None}
        return {"dest": dest, "nargs": 1}
    src.unresolved.append(f"--{dest}: action {action}")
    return None


def _config_strict(src: Source) -> bool:
    """SGLang's ConfigArgumentMerger (sglang/srt/[utils/]server_args_config_parser.py) refuses a
    config key whose action is neither store_true nor one value (`unsupported_actions`,
    "Unsupported config option ..."): 0.5.16 has it, 0.5.3rc2 does not."""
    for path in ("sglang/srt/server_args_config_parser.py",
                 "sglang/srt/utils/server_args_config_parser.py"):  # fmt: skip
        tree = src.trees.get(path)
        if tree is not None and "unsupported_actions" in ast.unparse(tree):
            return True
    return False


def release_record(project: str, release: Release) -> dict[str, Any]:
    src = Source(project, release)
    options = vllm_options(src) if project == "vllm" else sglang_options(src)
    rec: dict[str, Any] = {"options": options, "complete": not src.unresolved}
    if src.unresolved:
        rec["unresolved"] = sorted(set(src.unresolved))
    rec["files"] = sorted(src.trees)
    if project == "sglang":
        rec["config_strict"] = _config_strict(src)
    return rec


def _segments(project: str, covers: list[str], recs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """option -> [[first, last, spec], ...]: consecutive releases with the same spec merged."""
    out: dict[str, list[list[Any]]] = {}
    names = sorted({o for r in recs.values() for o in r["options"]})
    for opt in names:
        segs: list[list[Any]] = []
        for v in covers:
            spec = recs[v]["options"].get(opt)
            if spec is None:
                continue
            if segs and segs[-1][2] == spec and covers.index(segs[-1][1]) == covers.index(v) - 1:
                segs[-1][1] = v
            else:
                segs.append([v, v, spec])
        out[opt] = segs
    return out


SOURCES = {
    "vllm": "vllm-project/vllm released wheels: vllm/engine/arg_utils.py (EngineArgs.add_cli_args, "
    "AsyncEngineArgs.add_cli_args, get_kwargs), vllm/config.py or vllm/config/*.py (the config "
    "dataclasses' field types), vllm/entrypoints/openai/cli_args.py or "
    "vllm/entrypoints/common/cli_args.py (make_arg_parser, FrontendArgs), "
    "vllm/entrypoints/cli/serve.py (subparser_init), "
    "vllm/model_executor/layers/quantization/__init__.py (QUANTIZATION_METHODS, "
    "QuantizationMethods)",
    "sglang": "sgl-project/sglang released wheels: sglang/srt/server_args.py "
    "(ServerArgs.add_cli_args), sglang/srt/arg_groups/**.py (0.5.16+), "
    "sglang/srt/arg_groups/fields/*.py (A[type, Arg(...)] fields, 0.5.20+), "
    "sglang/srt/layers/quantization/__init__.py, sglang/srt/layers/moe/utils.py",
}


def run(project: str) -> dict[str, Any]:
    covers = json.loads((DATA / f"{project}.json").read_text())["covers"]
    by_version = {r.version: r for r in releases(project)}
    with ThreadPoolExecutor(4) as pool:
        read = pool.map(lambda v: release_record(project, by_version[v]), covers)
        recs = dict(zip(covers, read, strict=True))
    return {
        "schema": 1,
        "target": project,
        "extracted_by": "tools/extract/flags.py",
        "source": SOURCES[project],
        "releases": covers,
        "complete": [v for v in covers if recs[v]["complete"]],
        "unresolved": {v: recs[v]["unresolved"] for v in covers if not recs[v]["complete"]},
        **(
            {"config_strict": [v for v in covers if recs[v].get("config_strict")]}
            if project == "sglang"
            else {}
        ),
        "options": _segments(project, covers, recs),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", nargs="*", help="PROJECT==VERSION: print, write nothing")
    ap.add_argument("projects", nargs="*", default=["vllm", "sglang"])
    args = ap.parse_args()
    if args.only:
        for spec in args.only:
            project, version = spec.split("==")
            rel = {r.version: r for r in releases(project)}[version]
            print(json.dumps(release_record(project, rel), indent=1, sort_keys=True))
        return
    OUT.mkdir(parents=True, exist_ok=True)
    for project in args.projects:
        data = run(project)
        text = json.dumps(data, sort_keys=True, separators=(",", ":"))
        # One option a line: small diffs when a release is added.
        text = text.replace('],"--', '],\n"--').replace('"options":{', '"options":{\n')
        (OUT / f"{project}.json").write_text(text + "\n")
        print(f"{project}: {len(data['releases'])} releases, {len(data['options'])} options, "
              f"{len(data['complete'])} complete", file=sys.stderr)  # fmt: skip


if __name__ == "__main__":
    main()
