"""The fleet offline: a directory of facts snapshots (`fp4doctor probe --json` from each node),
each judged with the same question, into one fleet report.

A node is named after its file (`b200-07.json` -> `b200-07`): snapshots are redacted, so their
`hostname` says `<redacted>`. A snapshot that cannot be read is a node without a verdict, named
in the report, not the end of the run.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from fp4doctor import facts
from fp4doctor.fleet import group, view

if TYPE_CHECKING:
    from fp4doctor.doctor import Question

SUFFIX = ".json"


class FleetError(ValueError):
    """The fleet cannot be gathered as asked (no such directory, no snapshot in it)."""


def snapshots(directory: str | Path) -> list[Path]:
    """The facts files of a directory: `*.json`, not hidden, sorted by name."""
    d = Path(directory)
    if not d.is_dir():
        raise FleetError(f"{d}: not a directory (--facts DIR takes a directory of snapshots)")
    found = sorted(p for p in d.iterdir() if p.suffix == SUFFIX and not p.name.startswith("."))
    if not found:
        raise FleetError(f"{d}: no facts snapshot (*.json from `fp4doctor probe --json`) in it")
    return found


def judge(path: Path, question: Question, name: str | None = None) -> view.NodeView:
    """One snapshot judged: its view, or a failed view naming why it could not be read. A
    question that cannot be asked at all (an unknown target) raises QuestionError."""
    from fp4doctor.doctor import diagnose

    label = name or path.stem
    try:
        report = diagnose(replace(question, facts_file=str(path), smoke=False))
    except facts.FactsError as exc:
        return view.failed(label, str(exc))
    return view.of(label, report)


def from_directory(directory: str | Path, question: Question) -> group.FleetReport:
    """Judge every snapshot of `directory` with `question` (its `facts_file` is replaced)."""
    return group.build(judge(p, question) for p in snapshots(directory))
