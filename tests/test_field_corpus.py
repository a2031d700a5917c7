"""The field corpus: real FP4 failures from public trackers, replayed against the doctor.

Each case in tests/field/cases/ runs its `command` against tests/field/hosts/<id>.json and must get
the expected exit code and mention every expected name (tests/field/corpus.py holds the rule).
A case the doctor does not catch yet (`caught_since: null`) is a strict xfail: when a change
starts catching it, this test fails until the case's `caught_since` is set, so the catch rate only
moves on purpose. `python tools/field_corpus.py` prints the rate.

The cases run in-process through click's runner (50 subprocesses would take ~15 s); one test
checks that a subprocess with a clean environment gives the same answer.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from field_loader import load_corpus

corpus = load_corpus()
CASES = corpus.load_cases()


def _param(case: Any) -> object:
    if case.caught_since is not None:
        return pytest.param(case, id=case.id)
    why = f"needs {' and '.join(case.needs)}" if case.needs else "knowable from host facts"
    reason = f"not caught yet ({why}): {case.link}"
    if case.unknowable:
        reason = f"unknowable: {case.unknowable}: {case.link}"
    return pytest.param(case, id=case.id, marks=pytest.mark.xfail(strict=True, reason=reason))


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_field_case(case: Any) -> None:
    verdict = corpus.judge_case(case)
    assert verdict.caught, (
        f"{case.id} ({case.link}): {verdict.explain()}\n"
        f"command: fp4doctor {' '.join(case.argv())}\n--- report ---\n{verdict.run.output[-4000:]}"
    )


def test_corpus_shape() -> None:
    """Enough cases, one id per file, every host snapshot loads as facts."""
    assert len(CASES) >= 45
    assert corpus.shape_problems(CASES, corpus.HOSTS_DIR) == []


def test_subprocess_agrees_with_in_process_run() -> None:
    """`python -m fp4doctor` in a clean environment gives the in-process exit code and text."""
    case = next(c for c in CASES if c.caught_since is not None)
    env = {
        k: v
        for k, v in os.environ.items()
        if not (k.startswith(corpus._ENV_PREFIXES) or k in corpus._ENV_NAMES)
    }
    proc = subprocess.run(
        [sys.executable, "-m", "fp4doctor", *case.argv()],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    in_process = corpus.run_case(case)
    assert proc.returncode == in_process.exit_code
    via_subprocess = corpus.judge_case(case, corpus.Run(proc.returncode, proc.stdout + proc.stderr))
    assert via_subprocess.caught, via_subprocess.explain()


def test_unknowable_is_a_reason_and_excludes_caught(tmp_path: Path) -> None:
    """`unknowable: <why>` parses as the reason; empty, or beside `caught_since`, is refused."""
    import yaml

    case = next(c for c in CASES if c.unknowable)
    assert not case.in_scope and case.caught_since is None
    data = yaml.safe_load(case.path.read_text(encoding="utf-8"))
    cases_dir = tmp_path / "cases"
    cases_dir.mkdir()
    path = cases_dir / case.path.name
    for bad, message in (({"unknowable": " "}, "sentence"), ({"caught_since": "x"}, "not")):
        path.write_text(yaml.safe_dump({**data, **bad}), encoding="utf-8")
        with pytest.raises(corpus.CaseError, match=message):
            corpus.parse_case(path)


def test_every_case_is_dated_and_the_newest_fifth_is_held_out() -> None:
    """`reported` dates every case; held_out() is the newest round(n/5) of them, by date."""
    held = corpus.held_out(CASES)
    assert len(held) == round(len(CASES) / corpus.HOLD_OUT_SHARE)
    newest = min(c.reported for c in CASES if c.id in held)
    assert all(c.reported <= newest for c in CASES if c.id not in held)
    assert all(c.reported_source for c in CASES)


def test_a_case_without_a_report_date_is_refused(tmp_path: Path) -> None:
    """A case must say when it was reported (YYYY-MM-DD) and where the date was read."""
    import yaml

    case = CASES[0]
    data = yaml.safe_load(case.path.read_text(encoding="utf-8"))
    cases_dir = tmp_path / "cases"
    cases_dir.mkdir()
    path = cases_dir / case.path.name
    for bad in ({"reported": "July 2026"}, {"reported": None}):
        path.write_text(yaml.safe_dump({**data, **bad}), encoding="utf-8")
        with pytest.raises(corpus.CaseError, match="reported"):
            corpus.parse_case(path)
