"""`fp4doctor config`: the choice as the engine's own config file, written atomically."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from fp4doctor.cli.app import Command
from fp4doctor.cli.console import EXIT_CODES_HELP, UserError, note, user_errors, write
from fp4doctor.cli.options import ask, question_options, settle, using

if TYPE_CHECKING:
    from fp4doctor.doctor import Question


@click.command(cls=Command, epilog=EXIT_CODES_HELP)
@question_options
@click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(dir_okay=False, allow_dash=True),
    help="File to write ('-' for stdout).",
)
@click.option("--force", is_flag=True, help="Overwrite an existing file.")
def config(q: Question, output: str, force: bool) -> None:
    """Write the choice as the engine's own config file (vLLM --config YAML, TensorRT-LLM
    options YAML) or, where the engine reads only variables, a dotenv file. Atomic."""
    from fp4doctor.atomic import write_atomic
    from fp4doctor.emit import emit
    from fp4doctor.emit.config import render_trtllm_yaml, render_vllm_yaml
    from fp4doctor.emit.knobs import exports_for, settings

    report = ask(q)
    settle(report, "nothing to write")
    resolution = settings([p.resolution for p in report.families])
    label = report.engine_label
    fmt = report.profile.engine.config_format
    with user_errors():
        if resolution.config:
            text = render_trtllm_yaml(dict(resolution.options))
        elif resolution.cli_args and fmt == "vllm-yaml":
            text = render_vllm_yaml(resolution.cli_args)
            if resolution.unset_env:
                note("also unset: " + " ".join(resolution.unset_env))
        elif fmt != "dotenv" and not (resolution.set_env or resolution.arguments):
            # Nothing to set: still a file in the engine's own format (an empty mapping).
            text = render_vllm_yaml(()) if fmt == "vllm-yaml" else render_trtllm_yaml({})
            note(f"nothing to set for {label}: writing an empty config")
            if resolution.unset_env:
                note("also unset: " + " ".join(resolution.unset_env))
        else:
            if fmt != "dotenv":
                note(f"{label} reads this choice from environment variables: writing a dotenv file")
            exports, notes = exports_for(report.profile, resolution, label)
            for n in notes:
                note(n)
            text = emit("dotenv", exports)
    if output == "-":
        write(text, kind="exact")
        return
    try:
        write_atomic(output, text, overwrite=force)
    except FileExistsError:
        raise UserError(f"{output} exists; pass --force to overwrite it") from None
    except OSError as exc:
        raise UserError(f"cannot write {output}: {exc.strerror or exc}") from None
    note(f"wrote {output} ({using(report)})")
