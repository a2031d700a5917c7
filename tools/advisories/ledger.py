"""Check the advisory ledgers; print coverage: commits reviewed / commits touching the FP4 paths.

    python tools/advisories/ledger.py                   # coverage of every ledger, as Markdown
    python tools/advisories/ledger.py --check GIT_DIR   # also: the walk and the ledger agree

A ledger (`tools/advisories/<project>.tsv`) has one row per candidate commit that walk.py lists:
`range sha date pr topics subject decision advisory symptom review reason`. `decision` is one of
DECISIONS; `encoded` names an id of profiles/advisories.yaml, `proposed` one of
tools/advisories/proposed.yaml, `encoded-rule` the profile rule that carries the boundary; `open`
rows are not reviewed yet and count against coverage. `review` says how far the row was read:
`message` (the whole commit message, PR description included), `hits` (the subject, and the lines
of the message that name a defect: fix, bug, crash, NaN, wrong, hang, ...), `scan` (the subject;
the message was scanned for those words and has none), `subject` (the subject line only) or `dup`
(a cherry-pick of a pull request reviewed in an earlier range).
Exit 1 when a row is malformed, names an unknown advisory, or the walk and the ledger disagree.
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
COLUMNS = (
    "range",
    "sha",
    "date",
    "pr",
    "topics",
    "subject",
    "decision",
    "advisory",
    "symptom",
    "review",
    "reason",
)
LEDGERS = ("flashinfer.tsv", "sglang.tsv", "vllm.tsv")  # one per project, beside this file
DECISIONS = ("encoded", "encoded-rule", "proposed", "dismissed", "dup", "open")
REVIEWS = ("message", "hits", "scan", "subject", "dup")
SYMPTOMS = ("", "crash", "wrong-output", "hang", "slow")


@dataclass(frozen=True)
class Row:
    """One candidate commit and what was decided about it."""

    range: str
    sha: str
    pr: str
    subject: str
    decision: str
    advisory: str
    symptom: str
    review: str
    reason: str
    line: int


def read(path: Path) -> list[Row]:
    """The ledger's rows; ValueError names the file and line of a malformed one."""
    with path.open(encoding="utf-8", newline="") as f:
        reader = csv.reader(f, delimiter="\t")
        header = next(reader, None)
        if tuple(header or ()) != COLUMNS:
            raise ValueError(f"{path}:1: the header must be {' '.join(COLUMNS)}")
        rows = []
        for n, fields in enumerate(reader, start=2):
            if len(fields) != len(COLUMNS):
                raise ValueError(f"{path}:{n}: {len(fields)} fields, expected {len(COLUMNS)}")
            rec = dict(zip(COLUMNS, fields, strict=True))
            row = Row(
                range=rec["range"],
                sha=rec["sha"],
                pr=rec["pr"],
                subject=rec["subject"],
                decision=rec["decision"],
                advisory=rec["advisory"],
                symptom=rec["symptom"],
                review=rec["review"],
                reason=rec["reason"],
                line=n,
            )
            _validate(row, path)
            rows.append(row)
    return rows


def _validate(row: Row, path: Path) -> None:
    where = f"{path}:{row.line}"
    if row.decision not in DECISIONS:
        raise ValueError(f"{where}: decision '{row.decision}' is not one of {', '.join(DECISIONS)}")
    if row.review not in REVIEWS:
        raise ValueError(f"{where}: review '{row.review}' is not one of {', '.join(REVIEWS)}")
    if row.symptom not in SYMPTOMS:
        raise ValueError(f"{where}: symptom '{row.symptom}' is not a symptom class")
    if row.decision in ("encoded", "encoded-rule", "proposed") and not row.advisory:
        raise ValueError(f"{where}: a '{row.decision}' row names the advisory or rule")
    if row.decision in ("dismissed", "open") and not row.reason:
        raise ValueError(f"{where}: a '{row.decision}' row gives its one-line reason")


def advisory_ids(path: Path) -> set[str]:
    """The ids of an advisories file (profiles/advisories.yaml or proposed.yaml)."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    return {entry["id"] for entry in data.get("advisories") or []}


def unknown_ids(rows: Sequence[Row], known: set[str], proposed: set[str]) -> list[str]:
    """Rows whose `encoded`/`proposed` advisory id is in neither file."""
    bad = []
    for row in rows:
        if row.decision == "encoded" and row.advisory not in known:
            bad.append(f"line {row.line}: encoded '{row.advisory}' is not in advisories.yaml")
        if row.decision == "proposed" and row.advisory not in proposed:
            bad.append(f"line {row.line}: proposed '{row.advisory}' is not in proposed.yaml")
    return bad


def coverage(rows: Sequence[Row]) -> list[dict[str, object]]:
    """Per release range: touching, reviewed (not open), by depth and by outcome."""
    by_range: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        by_range[row.range].append(row)
    out = []
    for name, group in by_range.items():
        touching = [r for r in group if r.decision != "dup"]
        out.append(
            {
                "range": name,
                "touching": len(touching),
                "reviewed": sum(r.decision != "open" for r in touching),
                "message": sum(r.review == "message" for r in touching),
                "hits": sum(r.review == "hits" for r in touching),
                "scan": sum(r.review == "scan" for r in touching),
                "subject": sum(r.review == "subject" for r in touching),
                "encoded": sum(r.decision in ("encoded", "encoded-rule") for r in touching),
                "proposed": sum(r.decision == "proposed" for r in touching),
                "dup": len(group) - len(touching),
            }
        )
    return out


def markdown(project: str, table: Sequence[dict[str, object]]) -> str:
    """The coverage table tools/advisories/README.md carries."""
    lines = [
        f"| {project} range | touching | reviewed | coverage | message | hits | scan | subject "
        "| encoded | proposed |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    keys = ("touching", "reviewed", "message", "hits", "scan", "subject", "encoded", "proposed")
    total = dict.fromkeys(keys, 0)
    for row in table:
        for key in total:
            total[key] += int(str(row[key]))
        lines.append(_line(str(row["range"]), row))
    lines.append(_line("**all**", total))
    return "\n".join(lines)


def _line(name: str, row: Mapping[str, object]) -> str:
    touching, reviewed = int(str(row["touching"])), int(str(row["reviewed"]))
    pct = f"{100 * reviewed / touching:.0f}%" if touching else "-"
    return (
        f"| {name} | {touching} | {reviewed} | {pct} | {row['message']} | {row['hits']} "
        f"| {row['scan']} | {row['subject']} | {row['encoded']} | {row['proposed']} |"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", type=Path, metavar="GIT_DIR", help="FlashInfer git directory")
    args = parser.parse_args(argv)
    known = advisory_ids(ROOT / "profiles" / "advisories.yaml")
    proposed = advisory_ids(HERE / "proposed.yaml")
    status = 0
    for path in (HERE / name for name in LEDGERS):
        try:
            rows = read(path)
        except ValueError as exc:
            print(exc, file=sys.stderr)
            return 1
        for problem in unknown_ids(rows, known, proposed):
            print(f"{path.name}: {problem}", file=sys.stderr)
            status = 1
        print(markdown(path.stem, coverage(rows)))
        if args.check and path.stem == "flashinfer":
            status |= _check_walk(args.check, rows)
    return status


def _check_walk(git_dir: Path, rows: Sequence[Row]) -> int:
    sys.path.insert(0, str(HERE.parents[1]))  # the checkout: tools.advisories.*
    from tools.advisories import walk  # the candidate filter lives in walk.py, beside this file

    found = {c.sha for c in walk.walk(git_dir)}
    have = {r.sha for r in rows if r.sha != "wheel"}  # file-level rows past the snapshot
    missing, extra = sorted(found - have), sorted(have - found)
    for sha in missing:
        print(f"flashinfer.tsv lacks candidate {sha}", file=sys.stderr)
    for sha in extra:
        print(f"flashinfer.tsv has {sha}, which the walk does not list", file=sys.stderr)
    return 1 if missing or extra else 0


if __name__ == "__main__":
    sys.exit(main())
