"""`fp4doctor prewarm`: build the FlashInfer JIT modules the first start-up would build."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

import click

from fp4doctor.console import EXIT_CODES_HELP, Command, UserError, note, user_errors, write
from fp4doctor.options import ask, question_options, settle

if TYPE_CHECKING:
    from fp4doctor.doctor import Question

WORKSPACE_VARIABLE = "FLASHINFER_WORKSPACE_BASE"


@click.command(cls=Command, epilog=EXIT_CODES_HELP)
@question_options
@click.option("--dry-run", is_flag=True, help="Say what would be built; build nothing.")
@click.option(
    "--cache-dir",
    "cache_dir",
    default=None,
    metavar="DIR",
    help="Build into DIR/.cache/flashinfer (FLASHINFER_WORKSPACE_BASE); give the engine the same.",
)
@click.option(
    "--build-timeout",
    type=click.FloatRange(min=1),
    default=None,
    metavar="SECONDS",
    help="Stop a module's build after this long (default: no limit; builds take minutes).",
)
def prewarm(q: Question, dry_run: bool, cache_dir: str | None, build_timeout: float | None) -> None:
    """Build, before the engine starts, the FlashInfer JIT modules its first start-up would
    build for each family's chosen backend (one line per module on stdout).

    Refuses, exit 1, when a family has no valid backend here, when the backend --prefer or
    --require names cannot run here (a native FP4 backend on a GPU below compute capability
    10.0, e.g. an H200), or when its modules cannot be built.
    """
    from dataclasses import replace

    from fp4doctor.coldstart.prewarm import build, plan

    if q.facts_file and not dry_run:
        raise UserError("prewarm builds on this host: --facts only with --dry-run")
    # A backend named for prewarm is required, not preferred: building for another one than
    # asked (the fallback a GPU below 10.0 gets) would prewarm the wrong thing.
    report = ask(replace(q, smoke=False, require=q.require or q.prefer))
    settle(report, "nothing to prewarm")
    steps = []
    refused = False
    for part in report.families:
        cold, backend = part.cold_start, part.chosen
        if cold is None or backend is None:
            continue
        jit = cold.jit
        if jit.state == "cannot-build":
            note(f"{part.title}, {backend}: cannot build: {jit.reason}")
            refused = True
        elif jit.state == "will-build" and jit.modules != ("cute-dsl kernels",):
            steps += plan(report.facts, part.family, backend, jit.modules)
        else:
            note(f"{part.title}, {backend}: nothing to build (JIT {jit.state}: {jit.reason})")
        if cold.autotune.state == "will-tune":
            note(
                f"{part.title}: the autotune is not prewarmed (it runs in the engine's warm-up "
                "for the model's shapes); `fp4doctor env --cold-start persist` keeps its results"
            )
    if refused:
        sys.exit(1)
    env = dict(os.environ)
    if cache_dir:
        env[WORKSPACE_VARIABLE] = os.path.abspath(os.path.expanduser(cache_dir))
        note(f"building into {env[WORKSPACE_VARIABLE]}: start the engine with the same "
             f"{WORKSPACE_VARIABLE}")  # fmt: skip
    failed = False
    for step in steps:
        if dry_run:
            write(f"would build {step.module} ({step.builder or 'no generator known'})\n")
            continue
        note(f"building {step.module} ({step.builder}) for {step.backend}...")
        with user_errors():
            why = build(step, env, build_timeout)
        write(f"{'built' if why is None else 'failed'} {step.module}\n")
        if why:
            note(why)
            failed = True
    sys.exit(1 if failed else 0)
