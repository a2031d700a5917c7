"""`fp4doctor explain`: per layer class of --model, the kernel the engine picks, and why."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from fp4doctor.console import Command, UserError, write
from fp4doctor.options import ask, question_options
from fp4doctor.terminal import clean

if TYPE_CHECKING:
    from fp4doctor.doctor import Question


@click.command(cls=Command)
@question_options
@click.option("--json", "as_json", is_flag=True, help="Print the explanation as JSON.")
def explain(q: Question, as_json: bool) -> None:
    """Per layer class of --model: the kernel this engine release picks, and why each earlier
    candidate was skipped (exit 0 once explained; 2 for a bad question or checkpoint)."""
    from dataclasses import replace

    from fp4doctor import render
    from fp4doctor.selection import explain as explaining

    if q.model is None:
        raise UserError("explain needs --model PATH_OR_ID (and --tp N): the layers to explain")
    report = ask(replace(q, smoke=False))
    explanations = explaining.explain(report)
    if as_json:
        write(render.dumps(explaining.document(report, explanations)), kind="json")
    else:
        write(clean(explaining.text(report, explanations)))
