"""Print the doctor's catch rate on the field corpus (tests/field/).

    python tools/field_corpus.py            # totals, per category, per needs
    python tools/field_corpus.py --misses   # also one line per case not caught
    python tools/field_corpus.py --json     # the same numbers as JSON
    python tools/field_corpus.py --working  # also the precision corpus, one line per case

Caught: the doctor exits with the expected code and names everything the case expects (the rule
in tests/field/corpus.py, shared with tests/test_field_corpus.py). Knowable: the case's `needs`
is empty, so host facts alone tell what is wrong. In scope: the case has no `unknowable: <why>`
(outside what a pre-flight can know even with the model); those are counted apart and listed with
their reason. It also lists cases whose `caught_since` no longer matches the outcome, the ones to
flip in the YAML.

Precision: the setups reported working (tests/field/working/) that end READY with the backend the
source names; a false NOT READY there is counted like a missed crash.

Held out: the newest fifth of the corpus by report date (`reported`; corpus.held_out) is counted
apart from the rest, so a rule fitted to the older cases shows how it does on reports it was not
written from.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def load_corpus() -> ModuleType:
    name = "fp4doctor_field_corpus"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "tests" / "field" / "corpus.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _rate(caught: int, total: int) -> str:
    pct = f"{100 * caught / total:.0f}%" if total else "-"
    return f"{caught}/{total} ({pct})"


def _in_scope(verdicts: Sequence[Any]) -> dict[str, int]:
    scoped = [v for v in verdicts if v.case.unknowable is None]
    return {"caught_in_scope": sum(v.caught for v in scoped), "in_scope": len(scoped)}


def summarise(verdicts: Sequence[Any], held: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The numbers the report prints: overall, knowable, held out, per category and per need."""
    by_category: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    by_need: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for v in verdicts:
        by_category[v.case.category][0] += v.caught
        by_category[v.case.category][1] += 1
        for need in v.case.needs or ("none",):
            by_need[need][0] += v.caught
            by_need[need][1] += 1
    knowable = [v for v in verdicts if v.case.knowable]
    in_scope = [v for v in verdicts if v.case.unknowable is None]
    in_scope_needs: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for v in in_scope:
        for need in v.case.needs or ("none",):
            in_scope_needs[need][0] += v.caught
            in_scope_needs[need][1] += 1
    newest = [v for v in verdicts if v.case.id in held]
    older = [v for v in verdicts if v.case.id not in held]
    return {
        "caught": sum(v.caught for v in verdicts),
        "total": len(verdicts),
        "held_out": {
            "newest_fifth": {
                "caught": sum(v.caught for v in newest),
                "total": len(newest),
                "since": min((v.case.reported for v in newest), default=None),
                "cases": sorted(v.case.id for v in newest),
                **_in_scope(newest),
            },
            "rest": {
                "caught": sum(v.caught for v in older),
                "total": len(older),
                **_in_scope(older),
            },
        },
        "caught_knowable": sum(v.caught for v in knowable),
        "knowable": len(knowable),
        "caught_in_scope": sum(v.caught for v in in_scope),
        "in_scope": len(in_scope),
        "in_scope_by_needs": {
            k: {"caught": c, "total": t} for k, (c, t) in sorted(in_scope_needs.items())
        },
        "unknowable": {v.case.id: v.case.unknowable for v in verdicts if v.case.unknowable},
        "by_category": {k: {"caught": c, "total": t} for k, (c, t) in sorted(by_category.items())},
        "by_needs": {k: {"caught": c, "total": t} for k, (c, t) in sorted(by_need.items())},
        "stale_flags": [
            v.case.id for v in verdicts if v.caught != (v.case.caught_since is not None)
        ],
        "misses": {v.case.id: v.explain() for v in verdicts if not v.caught},
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--misses", action="store_true", help="list every case not caught")
    parser.add_argument("--json", action="store_true", help="print the numbers as JSON")
    parser.add_argument(
        "--working", action="store_true", help="list every precision case and what blocked it"
    )
    args = parser.parse_args(argv)

    corpus = load_corpus()
    cases = corpus.load_cases()
    summary = summarise(corpus.judge_all(cases), corpus.held_out(cases))
    working = [corpus.judge_working(c) for c in corpus.load_working()]
    summary["precision"] = {
        "ready": sum(v.held for v in working),
        "total": len(working),
        "false_not_ready": {v.case.id: v.explain() for v in working if not v.held},
        "advice": {v.case.id: v.explain() for v in working if v.held and v.advice},
    }
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0

    print(f"caught / total:    {_rate(summary['caught'], summary['total'])}")
    print(f"caught / knowable: {_rate(summary['caught_knowable'], summary['knowable'])}")
    print(f"caught / in scope: {_rate(summary['caught_in_scope'], summary['in_scope'])}")
    newest, rest = summary["held_out"]["newest_fifth"], summary["held_out"]["rest"]
    print(
        f"held out, newest fifth (reported {newest['since']} on): "
        f"{_rate(newest['caught'], newest['total'])}, "
        f"in scope {_rate(newest['caught_in_scope'], newest['in_scope'])}"
    )
    print(
        f"the rest (older reports):                   {_rate(rest['caught'], rest['total'])}, "
        f"in scope {_rate(rest['caught_in_scope'], rest['in_scope'])}"
    )
    precision = summary["precision"]
    print(
        f"precision (working setups READY as reported): "
        f"{_rate(precision['ready'], precision['total'])}"
    )
    print("\nby category:")
    for name, n in summary["by_category"].items():
        print(f"  {name:<12} {_rate(n['caught'], n['total'])}")
    print("\nby needs:")
    for name, n in summary["by_needs"].items():
        print(f"  {name:<12} {_rate(n['caught'], n['total'])}")
    print("\nby needs, in scope (cases marked unknowable left out):")
    for name, n in summary["in_scope_by_needs"].items():
        print(f"  {name:<12} {_rate(n['caught'], n['total'])}")
    if summary["unknowable"]:
        print(f"\nunknowable ({len(summary['unknowable'])}: out of what fp4doctor models):")
        for case_id, why in summary["unknowable"].items():
            print(f"  {case_id}: {why}")
    if summary["stale_flags"]:
        print("\ncaught_since to update (outcome changed):")
        for case_id in summary["stale_flags"]:
            print(f"  {case_id}")
    if args.working and precision["false_not_ready"]:
        print("\nworking setups not READY as reported:")
        for case_id, why in precision["false_not_ready"].items():
            print(f"  {case_id}: {why}")
    if args.working and precision["advice"]:
        print("\nworking setups READY, where the doctor advises another backend:")
        for case_id, why in precision["advice"].items():
            print(f"  {case_id}: {why}")
    if args.misses:
        print("\nnot caught:")
        for case_id, why in summary["misses"].items():
            print(f"  {case_id}: {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
