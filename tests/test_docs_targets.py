"""docs/targets/<target>.md equals what the shipped profile renders to: the docs cannot drift."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

from fp4doctor import profile
from fp4doctor.profile.markdown import render, versions_text
from fp4doctor.versions import spec_text

DOCS = Path(__file__).resolve().parent.parent / "docs" / "targets"
REGENERATE = "regenerate with: python docs/targets/generate.py"


@pytest.mark.parametrize("target", profile.builtin_names())
def test_committed_page_equals_rendered_profile(target: str) -> None:
    page = DOCS / f"{target}.md"
    assert page.is_file(), f"docs/targets/{target}.md is missing; {REGENERATE}"
    # Rendered in a fresh interpreter, as docs/targets/generate.py renders it: not from objects
    # another test of this worker loaded (an xdist worker's order once showed a rule's `when` as
    # `<0.20.0` here and `<0.20` in the generator).
    code = (
        "import sys; from fp4doctor import profile; from fp4doctor.profile.markdown import render;"
        f" sys.stdout.write(render(profile.load({target!r})))"
    )
    env = {**os.environ, "FP4DOCTOR_CACHE_DIR": ""}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, env=env, check=True)
    expected = done.stdout.decode("utf-8")
    assert page.read_text(encoding="utf-8") == expected, (
        f"docs/targets/{target}.md differs from profiles/{target}.yaml; {REGENERATE}"
    )


def test_every_page_has_a_profile() -> None:
    pages = {p.stem for p in DOCS.glob("*.md")}
    assert pages == set(profile.builtin_names()), (
        f"pages without a profile, or missing; {REGENERATE}"
    )


@pytest.mark.parametrize("target", profile.builtin_names())
def test_page_names_every_backend_and_era(target: str) -> None:
    p = profile.load(target)
    text = render(p)
    for name in p.backends:
        assert f"### {name}\n" in text
    for era in p.eras:
        assert f"### {versions_text(era.versions)}\n" in text


def test_render_is_deterministic() -> None:
    p = profile.load("vllm")
    assert render(p) == render(profile.load("vllm"))


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        (">=0.11.1,<0.15", "0.11.1 ≤ v < 0.15"),
        ("<0.10.1", "v < 0.10.1"),
        (">=0.28", "v ≥ 0.28"),
        ("", "every version"),
        ("==0.6.12", "==0.6.12"),
    ],
)
def test_versions_in_words(spec: str, words: str) -> None:
    assert versions_text(SpecifierSet(spec)) == words


def test_specifier_lower_bound_first() -> None:
    assert spec_text(SpecifierSet("<0.6.16,>=0.5.1")) == ">=0.5.1, <0.6.16"
