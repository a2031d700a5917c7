"""The layout the design promises: the fleet's commands import no part of the command line, and
no module of fp4doctor/ imports one that imports it back (an import circle)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "fp4doctor"


def test_the_fleet_commands_import_no_part_of_the_command_line() -> None:
    code = (
        "import sys, fp4doctor.fleet.commands; "
        "print(sorted(m for m in sys.modules if m.startswith('fp4doctor.cli')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def _module(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, modules: set[str]) -> set[str]:
    """Every fp4doctor module `path` imports, anywhere in it (lazy and TYPE_CHECKING ones too)."""
    found: set[str] = set()
    here = _module(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package.split(".")[: len(package.split(".")) - node.level + 1],
                                 *([base] if base else [])])  # fmt: skip
            names = [base, *(f"{base}.{a.name}" for a in node.names)]
        else:
            continue
        found |= {n for n in names if n in modules and n != here}
    return found


def test_no_import_circle_in_fp4doctor() -> None:
    paths = {_module(p): p for p in PACKAGE.rglob("*.py")}
    modules = set(paths)
    graph = {m: _imports(p, modules) for m, p in paths.items()}
    # A package's __init__ that re-exports its own modules is one unit with them: an edge from a
    # module to its own package (or back) is not a circle between concepts.
    for m, deps in graph.items():
        graph[m] = {d for d in deps if not (m.startswith(d + ".") or d.startswith(m + "."))}
    circles: list[list[str]] = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for d in sorted(graph[m]):
            if state.get(d) == 1:
                circles.append([*stack[stack.index(d) :], d])
            elif d not in state:
                visit(d)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)
    assert circles == [], "\n".join(" -> ".join(c) for c in circles)
