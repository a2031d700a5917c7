"""Check ids are documented: every id the doctor emits matches a pattern of docs/checks.md.

Over every fixture host × every shipped target (static checks), and the live results (smoke and
agreement ids) of the real H200 reports in tests/fixtures/reports. A new kind of id fails here
until docs/checks.md has a row for it.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

import pytest
from conftest import HOSTS_DIR

from fp4doctor import profile
from fp4doctor.doctor import Question, diagnose

ROOT = Path(__file__).resolve().parent.parent
CHECKS = ROOT / "docs" / "checks.md"
REPORTS = ROOT / "tests" / "fixtures" / "reports"

_SEGMENT = r"[A-Za-z0-9_+-]+"


def pattern_regex(pattern: str) -> re.Pattern[str]:
    """docs/checks.md's notation as a regular expression: `<x>` one segment, `<x...>` one or more
    dotted segments, `<N>` a number, `[...]` optional, anything else literal."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if c == "<":
            end = pattern.index(">", i)
            name = pattern[i + 1 : end]
            if name == "N":
                out.append(r"\d+")
            elif name.endswith("..."):
                out.append(rf"{_SEGMENT}(?:\.{_SEGMENT})*")
            else:
                out.append(_SEGMENT)
            i = end + 1
        elif c == "[":
            out.append("(?:")
            i += 1
        elif c == "]":
            out.append(")?")
            i += 1
        else:
            out.append(re.escape(c))
            i += 1
    return re.compile("".join(out))


@functools.cache
def documented() -> dict[str, re.Pattern[str]]:
    """The first cell of every table row of docs/checks.md, when it is a backticked pattern."""
    rows = re.findall(r"^\| `([^`]+)` \|", CHECKS.read_text(encoding="utf-8"), re.M)
    return {row: pattern_regex(row) for row in rows}


def undocumented(ids: set[str]) -> list[str]:
    return sorted(i for i in ids if not any(p.fullmatch(i) for p in documented().values()))


def test_the_notation_reads_as_documented() -> None:
    rx = pattern_regex("backend.<backend>.advisory.<advisory...>[.gpu<N>]")
    assert rx.fullmatch("backend.flashinfer-cudnn.advisory.flashinfer-0.6.12-x.gpu3")
    assert rx.fullmatch("backend.cutlass.advisory.a")
    assert not rx.fullmatch("backend.cutlass.advisory.")
    assert not pattern_regex("host.gpus").fullmatch("host.gpusX")
    assert not pattern_regex("env.<VARIABLE>").fullmatch("env.A.B")


def test_a_new_kind_of_id_is_caught() -> None:
    assert undocumented({"host.gpus", "host.newthing", "backend.x.y.z.w"}) == [
        "backend.x.y.z.w",
        "host.newthing",
    ]


@pytest.mark.parametrize("target", profile.builtin_names())
def test_every_id_over_every_fixture_host_is_documented(target: str) -> None:
    ids: set[str] = set()
    for path in sorted(HOSTS_DIR.glob("*.json")):
        report = diagnose(Question(facts_file=str(path), target=target, smoke=False))
        ids |= {f.id for f in report.findings()}
    assert len(ids) > 50
    assert undocumented(ids) == []


def test_every_id_of_the_live_h200_reports_is_documented() -> None:
    ids: set[str] = set()
    for path in REPORTS.rglob("*.json"):
        ids |= {f["id"] for f in json.loads(path.read_text(encoding="utf-8"))["findings"]}
    assert any(i.startswith("smoke.") for i in ids) and any(i.startswith("agree.") for i in ids)
    assert undocumented(ids) == []


def test_the_ids_the_code_spells_out_are_documented() -> None:
    """Ids written literally in the code, whether or not a fixture reaches them."""
    literal = {
        "host.gpus", "host.gpus.mixed", "host.synthetic", "host.probe.gpu.nvml0",
        "host.package.torch", "host.package.vllm.version", "env.VLLM_NVFP4_GEMM_BACKEND.backend",
        "env.VLLM_USE_FLASHINFER_MOE_FP4.overridden", "smoke.emulation.cpu",
        "smoke.flashinfer-cudnn.gpu0", "smoke.marlin.fp4doctor.gpu1",
        "agree.flashinfer-cudnn.flashinfer-cudnn.gpu0", "resolve.require", "resolve.moe.require",
        "model.format.moe", "model.engine_auto.linear",
    }  # fmt: skip
    assert undocumented(literal) == []
