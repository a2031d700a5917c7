"""The precision corpus: setups public sources report running NVFP4 correctly, replayed as tests.

Each case in tests/field/working/cases/ runs its `command` against working/hosts/<id>.json and must
end READY (exit 0) with, per family the source names, that backend as what the setup runs in the
doctor's model: the engine's own pick, or the backend the command requires when the source passed
its flag (the rule is in tests/field/corpus.py, `judge_working`). A false NOT READY here is a
defect like a missed crash. Where the doctor then advises another backend, `python
tools/field_corpus.py --working` lists it.

KNOWN_FALSE_NOT_READY lists the cases the doctor gets wrong today, each with what blocks it. The
test asserts that set exactly: it fails when another case starts failing and when a listed one is
fixed (then take it out of the set), so the precision only moves on purpose.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from field_loader import load_corpus

corpus = load_corpus()
WORKING = corpus.load_working()

# Case id -> what blocks READY today (advisory ids, or the rule/finding id), as of this commit.
KNOWN_FALSE_NOT_READY: dict[str, str] = {}


def test_precision_corpus_shape() -> None:
    """At least 30 cases, one id per file, every host snapshot loads and names its source."""
    from fp4doctor import facts

    assert len(WORKING) >= 30
    assert corpus.shape_problems(WORKING, corpus.WORKING_HOSTS_DIR) == []
    for case in WORKING:
        synthetic = facts.load(case.host_path).synthetic or ""
        assert synthetic.startswith("synthetic-from-source"), case.id
    assert set(KNOWN_FALSE_NOT_READY) <= {c.id for c in WORKING}


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in WORKING])
def test_working_setup(case: Any) -> None:
    """READY with the source's backend, unless the case is a known false NOT READY (then not)."""
    verdict = corpus.judge_working(case)
    if case.id in KNOWN_FALSE_NOT_READY:
        assert not verdict.held, (
            f"{case.id} is READY now: take it out of KNOWN_FALSE_NOT_READY "
            f"(was: {KNOWN_FALSE_NOT_READY[case.id]})"
        )
        return
    assert verdict.held, (
        f"{case.id} ({case.link}): {verdict.explain()}\ncommand: fp4doctor {' '.join(case.argv())}"
    )


def test_working_case_format_is_checked(tmp_path: Path) -> None:
    """A working case must expect ready: true and may pick only linear/moe backends."""
    import yaml

    case = WORKING[0]
    data = yaml.safe_load(case.path.read_text(encoding="utf-8"))
    path = tmp_path / case.path.name
    bad_cases = (
        ({"expect": {"exit": 1}}, "ready"),
        ({"expect": {"ready": True, "pick": {"dense": "cutlass"}}}, "family"),
        ({"link": "github.com/x"}, "https"),
    )
    for bad, message in bad_cases:
        path.write_text(yaml.safe_dump({**data, **bad}), encoding="utf-8")
        with pytest.raises(corpus.CaseError, match=message):
            corpus.parse_working(path)
