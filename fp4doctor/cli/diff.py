"""`fp4doctor diff`: what upgrading the engine from --from to --to changes for this host."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from fp4doctor.console import Command, UserError, user_errors, write
from fp4doctor.options import question_options
from fp4doctor.terminal import clean

if TYPE_CHECKING:
    from fp4doctor.doctor import Question


@click.command(cls=Command)
@question_options
@click.option("--from", "old", required=True, metavar="VERSION", help="The release run now.")
@click.option("--to", "new", required=True, metavar="VERSION", help="The release to upgrade to.")
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
def diff(q: Question, old: str, new: str, as_json: bool) -> None:
    """What upgrading the engine from --from to --to changes for this host, per family: knobs,
    backends, the engine's pick, known problems, the env lines. Exit 0 when nothing this host
    uses changes, 1 when something does, 3 when a release cannot be judged here."""
    from fp4doctor import render
    from fp4doctor.diff import upgrade

    if q.engine_version is not None:
        raise UserError("diff compares --from and --to: --engine-version has no place here")
    from fp4doctor.versions import is_version, not_a_version

    for option, given in (("--from", old), ("--to", new)):
        if not is_version(given):
            raise UserError(not_a_version(option, given))
    with user_errors():
        changes = upgrade(q, old, new)
    if as_json:
        write(render.dumps(changes.to_dict()), kind="json")
    else:
        write(clean(changes.text()))
    sys.exit(changes.exit_code)
