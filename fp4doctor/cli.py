"""Command line: parse, call the pipeline, render, pick the exit code. Nothing else lives here."""

from __future__ import annotations

import sys

import click

from fp4doctor import __version__, facts


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="fp4doctor")
def main() -> None:
    """Find which NVFP4 GEMM backend really works on this host, and how to switch it on."""


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print the facts as JSON.")
@click.option("--redact/--no-redact", default=None, help="Strip UUIDs, hostname and home paths (default with --json).")
def probe(as_json: bool, redact: bool | None) -> None:
    """Print what this host has: GPUs, packages, cuDNN, toolchain, FP4 environment."""
    from fp4doctor.probe import probe_host

    host = probe_host()
    if redact if redact is not None else as_json:
        host = facts.redact(host)
    if as_json:
        sys.stdout.write(facts.dumps(host))
    else:
        sys.stdout.write(facts.dumps(host))  # replaced by the human renderer
