"""The click commands `node` and `fleet` (the command line loads this module when one of them
runs: fp4doctor/cli/app.py). It imports only click and the command line's shared helpers;
everything else loads inside the commands."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from fp4doctor.console import Command, NoVerdict, UserError, note, user_errors, write
from fp4doctor.options import question_options

if TYPE_CHECKING:
    from fp4doctor.doctor import Question
    from fp4doctor.fleet.group import FleetReport

NODE_EXIT_CODES_HELP = """\b
Exit codes (node-problem-detector custom plugin statuses):
  0  OK: ready (fp4doctor check would exit 0)
  1  NonOK: not ready (check would exit 1)
  2  Unknown: no verdict (check: 3), a usage or profile error (2), an output not written (4)"""

FLEET_EXIT_CODES_HELP = """\b
Exit codes:
  0  every node is ready
  1  at least one node was judged not ready
  2  usage or profile error
  3  no node is not ready, but at least one could not be judged (or no node was found)
  4  could not write the output
  130  interrupted (Ctrl-C)"""


@click.command(cls=Command, epilog=NODE_EXIT_CODES_HELP)
@question_options
@click.option(
    "--features-file",
    type=click.Path(dir_okay=False),
    help="Write an NFD local feature file here "
    "(/etc/kubernetes/node-feature-discovery/features.d/fp4doctor).",
)
@click.option(
    "--textfile",
    type=click.Path(dir_okay=False),
    help="Write a Prometheus textfile here (node-exporter's textfile directory, NAME.prom).",
)
@click.option(
    "--ready-file",
    type=click.Path(dir_okay=False),
    help="Write this file when the node is ready, remove it when it is not.",
)
@click.option(
    "--label-namespace",
    default="fp4doctor.io",
    show_default=True,
    help="Label namespace: fp4doctor.io, or feature.node.kubernetes.io (any NFD release).",
)
@click.option(
    "--expiry",
    type=click.IntRange(min=60),
    default=3600,
    show_default=True,
    help="Seconds after which NFD drops the labels unless this command wrote them again.",
)
@click.option("--name", help="The node's name in the outputs (default: the hostname).")
@click.option(
    "--smoke/--no-smoke",
    default=False,
    help="Also run the live GEMMs (off by default: serving pods hold the GPUs).",
)
def node(
    q: Question,
    features_file: str | None,
    textfile: str | None,
    ready_file: str | None,
    label_namespace: str,
    expiry: int,
    name: str | None,
    smoke: bool,
) -> None:
    """Check this node and write its NFD labels, Prometheus gauges and ready file, atomically.

    stdout carries one line (node-problem-detector's condition message); the exit code is a
    node-problem-detector custom plugin status.
    """
    from dataclasses import replace
    from datetime import timedelta

    from fp4doctor.fleet import labels
    from fp4doctor.fleet import node as agent

    if label_namespace not in labels.NAMESPACES:
        raise UserError(
            f"unknown --label-namespace {label_namespace!r} (valid: {', '.join(labels.NAMESPACES)})"
        )
    try:
        with user_errors():
            view = agent.run_check(replace(q, smoke=smoke), name, progress=note)
    except NoVerdict as exc:  # NPD reads 3 as Unknown too; 2 is its own spelling of it
        raise UserError(exc.message) from None
    outputs = agent.Outputs(
        features=features_file,
        textfile=textfile,
        ready=ready_file,
        namespace=label_namespace,
        expiry=timedelta(seconds=expiry),
    )
    try:
        agent.write(view, outputs)
    except (OSError, ValueError) as exc:
        where = getattr(exc, "filename", None)
        why = getattr(exc, "strerror", None) or str(exc)
        note(f"cannot write {where}: {why}" if where else f"cannot write the outputs: {why}")
        write(agent.message(view) + "\n")
        sys.exit(agent.NPD_UNKNOWN)
    write(agent.message(view) + "\n")
    sys.exit(agent.npd_exit_code(view.exit_code))


@click.command(cls=Command, epilog=FLEET_EXIT_CODES_HELP)
@question_options
@click.option(
    "--ray",
    "ray_address",
    is_flag=False,
    flag_value="auto",
    default=None,
    metavar="[ADDRESS]",
    help="Run one check on every alive node of this Ray cluster "
    "(default address: auto, the local one or RAY_ADDRESS). Needs fp4doctor[fleet].",
)
@click.option("--json", "as_json", is_flag=True, help="Print the fleet report as JSON.")
@click.option(
    "--smoke/--no-smoke",
    default=False,
    help="With --ray: also run the live GEMMs on every node.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=1),
    default=120.0,
    show_default=True,
    help="With --ray: seconds to wait for the nodes; those that do not answer are listed.",
)
def fleet(q: Question, ray_address: str | None, as_json: bool, smoke: bool, timeout: float) -> None:
    """One report across nodes: groups of identical nodes, outliers, readiness per family, and
    the env each group should use. --facts DIR judges a directory of `probe --json` snapshots
    offline; --ray [ADDRESS] checks every node of a Ray cluster where it runs."""
    from dataclasses import replace

    from fp4doctor.fleet import render
    from fp4doctor.render import Style

    directory, q = q.facts_file, replace(q, facts_file=None)
    if (directory is None) == (ray_address is None):
        raise UserError("give one of --facts DIR (snapshots, offline) or --ray [ADDRESS]")
    with user_errors():
        if directory is not None:
            from fp4doctor.fleet.fleet import FleetError, from_directory

            try:
                report = from_directory(directory, q)
            except FleetError as exc:
                raise UserError(str(exc)) from None
        else:
            report = _over_ray(ray_address or "auto", replace(q, smoke=smoke), timeout)
    if as_json:
        from fp4doctor.render import dumps

        write(dumps(render.document(report)), kind="json")
    else:
        write(render.human(report, style=Style.for_stream(sys.stdout)))
    sys.exit(report.exit_code)


def _over_ray(address: str, q: Question, timeout: float) -> FleetReport:
    try:
        from fp4doctor.fleet import fanout
    except ImportError as exc:
        raise UserError(
            f"--ray needs ray ({exc}); install it with: pip install 'fp4doctor[fleet]'"
        ) from None
    try:
        fanout.connect(address)
        note("checking every alive node of the Ray cluster...")
        return fanout.run(q, timeout_s=timeout)
    except fanout.FanoutError as exc:
        raise NoVerdict(str(exc)) from None


def _facts_takes_a_directory(command: click.Command) -> None:
    """`fleet --facts` names a directory of snapshots, where the shared option names a file."""
    for param in command.params:
        if param.name == "facts_file" and isinstance(param, click.Option):
            param.type = click.Path(file_okay=False)
            param.help = (
                "Judge every facts snapshot (*.json from `fp4doctor probe --json`) in this "
                "directory, offline."
            )
            param.metavar = "DIR"


_facts_takes_a_directory(fleet)
