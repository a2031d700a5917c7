"""The README's two commands are the ones CI and users run."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def commands() -> list[str]:
    blocks = re.findall(r"```sh\n(.*?)\n```", (ROOT / "README.md").read_text(), re.S)
    return [b.strip() for b in blocks]


def test_readme_has_the_run_command_and_the_test_command() -> None:
    run, test = commands()[:2]
    assert "pip install ." in run and run.endswith("fp4doctor check")
    assert "pytest" in test


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    test = commands()[1]
    ci = (ROOT / ".ci" / "run").read_text()
    assert test in ci, "the README's test command and .ci/run have drifted apart"


def test_readme_exit_codes_match_the_cli() -> None:
    from fp4doctor import console as cli

    readme = (ROOT / "README.md").read_text()
    for code in (cli.EXIT_READY, cli.EXIT_NOT_READY, cli.EXIT_USAGE, cli.EXIT_NO_VERDICT):
        assert f"| {code} |" in readme
