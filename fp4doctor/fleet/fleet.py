"""The fleet offline: a directory of facts snapshots (`fp4doctor probe --json` from each node),
judged with the same question, into one fleet report.

A node is named after its file (`b200-07.json` -> `b200-07`): snapshots are redacted, so their
`hostname` says nothing. A snapshot that cannot be read is a node without a verdict, named in
the report, not the end of the run.

Most of a fleet is copies of a few snapshots, so each distinct group of facts (fleet/key.py) is
judged once (`Judge`), and the directory is read as a stream: what is held grows with the
groups, not with the snapshots (5,000 of them, or 100,000: docs/performance.md#fleet-offline).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from fp4doctor import facts
from fp4doctor.fleet import group, key, view

if TYPE_CHECKING:
    from fp4doctor.doctor import Question

SUFFIX = ".json"


class FleetError(ValueError):
    """The fleet cannot be gathered as asked (no such directory, no snapshot in it)."""


class Judge:
    """One question asked of each distinct group of facts once: the view its facts get, for
    every node of that group."""

    def __init__(self, question: Question) -> None:
        self.question = replace(question, facts_file=None, smoke=False)
        self._views: dict[str, view.NodeView] = {}

    def __call__(self, keyed: key.Keyed, name: str) -> view.NodeView:
        """The view of group `keyed` (judged the first time it is asked, as node `name`). A
        question that cannot be asked at all (an unknown target) raises QuestionError."""
        found = self._views.get(keyed.key)
        if found is None:
            from fp4doctor.doctor import diagnose

            found = view.of(name, diagnose(self.question, host=keyed.facts))
            self._views[keyed.key] = found
        return found


def snapshots(directory: str | Path) -> Iterator[tuple[str, str]]:
    """The facts files of a directory, `*.json` and not hidden, as (node name, path), in the
    order the directory lists them (the report sorts the nodes)."""
    d = Path(directory)
    if not d.is_dir():
        raise FleetError(f"{d}: not a directory (--facts DIR takes a directory of snapshots)")
    with os.scandir(d) as entries:
        for entry in entries:
            if entry.name.endswith(SUFFIX) and not entry.name.startswith("."):
                yield entry.name[: -len(SUFFIX)], entry.path


def from_directory(directory: str | Path, question: Question) -> group.FleetReport:
    """Judge every snapshot of `directory` with `question` (its `facts_file` is replaced)."""
    keys, judge, gathered = key.Keys(), Judge(question), group.Gather()
    for name, path in snapshots(directory):
        try:
            keyed = keys.of(facts.read(path), path)
        except facts.FactsError as exc:
            gathered.fail(view.failed(name, str(exc)))
            continue
        gathered.add(keyed, name, judge(keyed, name))
    if gathered.empty:
        raise FleetError(
            f"{directory}: no facts snapshot (*.json from `fp4doctor probe --json`) in it"
        )
    return gathered.report()
