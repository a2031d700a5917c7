"""`fp4doctor probe` (what this host has) and `fp4doctor advisories` (the known bugs that
affect it)."""

from __future__ import annotations

import click

from fp4doctor import facts
from fp4doctor.console import Command, user_errors, write


@click.command(cls=Command)
@click.option("--json", "as_json", is_flag=True, help="Print the facts as JSON.")
@click.option(
    "--redact/--no-redact",
    default=None,
    help="Strip UUIDs, hostname and home paths (default with --json).",
)
def probe(as_json: bool, redact: bool | None) -> None:
    """Print what this host has: GPUs, packages, cuDNN, toolchain, FP4 environment."""
    host = _probe()
    if redact if redact is not None else as_json:
        host = facts.redact(host)
    if as_json:
        write(facts.dumps(host), kind="json")
        return
    from fp4doctor import render  # the text view only

    write(render.facts_text(host))


# --- advisories -----------------------------------------------------------------------------


@click.command(cls=Command)
@click.option(
    "--facts",
    "facts_file",
    type=click.Path(dir_okay=False),
    help="List what affects this facts snapshot instead of this host.",
)
@click.option("--json", "as_json", is_flag=True, help="Print them as JSON.")
def advisories(facts_file: str | None, as_json: bool) -> None:
    """List the known bugs (crash, wrong output, slow) that affect this host's packages and GPUs,
    for every engine and backend, MoE included. Exit 0 whatever is listed: `check` decides."""
    import json

    from fp4doctor import profile, render
    from fp4doctor.rules.advisories import affecting

    with user_errors():
        host = facts.load(facts_file) if facts_file else _probe()
        found = affecting(profile.known_issues(), host)
    if as_json:
        doc = [
            {
                "id": a.issue.id,
                "family": a.issue.family,
                "effect": a.issue.effect,
                "package": a.issue.package,
                "versions": str(a.issue.versions),
                "backends": list(a.issue.backends),
                "gpus": list(a.gpus),
                "reason": a.issue.reason,
                "fixed_in": a.issue.fixed_in,
                "workaround": a.issue.workaround,
                "source": a.issue.source,
            }
            for a in found
        ]
        write(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", kind="json")
        return
    write(render.advisories_text(found))


def _probe() -> facts.HostFacts:
    from fp4doctor.probe import probe_host
    from fp4doctor.probe.packages import profile_packages

    return probe_host(packages=profile_packages())  # what every shipped profile reads
