"""Load tests/field/corpus.py once, under one module name, for the tests that replay the corpora.

tests/field/ is data beside code, not a package; its corpus module is loaded by path so the field
corpus tests, the precision corpus tests and tools/field_corpus.py share one instance (the name
matches the tool's, so whichever loads first wins).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

NAME = "fp4doctor_field_corpus"


def load_corpus() -> ModuleType:
    """tests/field/corpus.py as a module (cached in sys.modules)."""
    if NAME in sys.modules:
        return sys.modules[NAME]
    path = Path(__file__).parent / "field" / "corpus.py"
    spec = importlib.util.spec_from_file_location(NAME, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[NAME] = module
    spec.loader.exec_module(module)
    return module
