"""`fp4doctor config`: the choice as the engine's own config file, written atomically."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from fp4doctor.console import EXIT_CODES_HELP, Command, UserError, note, user_errors, write
from fp4doctor.options import (
    ENGINE_COMMAND_HELP,
    ask,
    engine_command,
    question_options,
    settle,
    using,
)

if TYPE_CHECKING:
    from fp4doctor.doctor import Question


@click.command(cls=Command, epilog=f"{ENGINE_COMMAND_HELP}\n\n{EXIT_CODES_HELP}")
@engine_command
@question_options
@click.option(
    "-o",
    "--output",
    "outputs",
    required=True,
    multiple=True,
    type=click.Path(dir_okay=False, allow_dash=True),
    help="File to write ('-' for stdout): NAME.yaml for the engine's own config file, NAME.env "
    "for a dotenv file of its variables; give both when the choice needs both.",
)
@click.option("--force", is_flag=True, help="Overwrite an existing file.")
def config(q: Question, outputs: tuple[str, ...], force: bool) -> None:
    """Write the choice as the engine's own config file (vLLM's and SGLang's --config YAML,
    TensorRT-LLM's options YAML) and, for what that file cannot hold (environment variables),
    a dotenv file. The file's suffix must fit: fp4doctor names the right one. Atomic."""
    from fp4doctor.atomic import write_atomic
    from fp4doctor.emit.config import files, plan
    from fp4doctor.emit.knobs import settings

    report = ask(q)
    settle(report, "nothing to write")
    chosen = settings([p.resolution for p in report.families])
    label, version = report.engine_label, report.engine.version
    with user_errors():
        written = plan(report.profile, version, label, chosen)
        texts = files(written, outputs, report.profile, version, label)
    for n in written.notes:
        note(n)
    for output, text, why in texts:
        note(why)
        if output == "-":
            write(text, kind="exact")
            continue
        try:
            write_atomic(output, text, overwrite=force)
        except FileExistsError:
            raise UserError(f"{output} exists; pass --force to overwrite it") from None
        except OSError as exc:
            raise UserError(f"cannot write {output}: {exc.strerror or exc}") from None
        note(f"wrote {output} ({using(report)})")
