"""Issue 31, item 2: every fix the shipped profiles can print holds against the report it appears
in. Over every host fixture, target and era: a pinned version (`A==V`) is a release the package
index has (profiles/index.json), a minimum (`A>=V`) is met by one, a backend a fix says to use
is valid in that report, and the choice is never a backend with a known risk when a clean valid
one was reachable."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from packaging.version import Version

from fp4doctor import profile, released
from fp4doctor.doctor import Question, Report, diagnose
from fp4doctor.versions import bounds

HOSTS = sorted((Path(__file__).parent / "fixtures" / "hosts").glob("*.json"))
PIN = re.compile(r"'?([A-Za-z0-9_.-]+)(==|>=)([0-9][A-Za-z0-9_.+-]*[0-9A-Za-z])'?")
USE = re.compile(r"\buse (?:the )?([a-z0-9][a-z0-9-]+)")


def _eras() -> list[tuple[str, str]]:
    out = []
    for target in ("vllm", "sglang", "trtllm", "flashinfer"):
        for era in profile.load(target).eras:
            low = bounds(era.versions)[0]
            if low is not None:
                out.append((target, str(low)))
    return out


def problems(report: Report) -> list[str]:
    """What in this report's fixes (and its choice) the report itself contradicts."""
    names = {b for p in report.families for b in p.evaluation.verdicts}
    valid = {b for p in report.families for b, v in p.evaluation.verdicts.items() if v.valid}
    out = []
    for f in report.findings():
        if not f.fix or f.status.value == "pass":
            continue
        for package, op, version in PIN.findall(f.fix):
            known = released.versions(package)
            if known is None:
                continue
            if op == "==" and version not in known:
                out.append(f"{f.id}: pins {package}=={version}, not on the index: {f.fix}")
            if op == ">=" and not any(Version(k) >= Version(version) for k in known):
                out.append(f"{f.id}: needs {package}>={version}, never released: {f.fix}")
        for name in USE.findall(f.fix):
            meant = [n for n in names if n in (name, f"{name}-moe")]
            if meant and not set(meant) & valid:
                out.append(f"{f.id}: says to use {name}, which is not valid here: {f.fix}")
    for part in report.families:
        chosen = part.chosen
        verdicts = part.evaluation.verdicts
        if chosen is None or not verdicts[chosen].risks() or part.resolution.knob is None:
            continue
        # A weight-only fallback (Marlin: FP4 weights dequantized to BF16; its summary says
        # weight-only) is slow for certain where a native FP4 backend is valid: not clean then.
        backends = part.evaluation.profile.backends
        native = any(v.valid and backends[b].native for b, v in verdicts.items())
        clean = [
            b
            for b, v in verdicts.items()
            if v.valid
            and not v.risks()
            and (backends[b].native or not native)
            and part.evaluation.era.selecting_knob(b) is not None
        ]
        if clean and report.question.prefer is None:
            out.append(f"{part.family}: chose {chosen}, which has a known risk, over {clean}")
    return out


@pytest.mark.parametrize(("target", "version"), _eras(), ids=lambda v: str(v))
def test_every_fix_holds_against_its_own_report(target: str, version: str) -> None:
    found = []
    for host in HOSTS:
        report = diagnose(Question(target=target, facts_file=str(host), engine_version=version))
        found += [f"{host.stem}: {p}" for p in problems(report)]
    assert found == []


def test_a_pin_to_a_release_the_index_lacks_names_one_it_has(tmp_path: Path) -> None:
    """flashinfer-cubin has no 0.6.16.post3 on PyPI (issue 31): the fix must not pin it."""
    import json

    doc = json.loads((HOSTS[0].parent / "b200.json").read_text())
    doc["packages"]["versions"].update({"flashinfer-python": "0.6.16.post3"})
    doc["packages"]["versions"].update({"flashinfer-cubin": "0.6.12"})
    host = tmp_path / "b200-post3.json"
    host.write_text(json.dumps(doc))
    assert released.exists("flashinfer-cubin", "0.6.16.post3") is False
    report = diagnose(Question(target="vllm", facts_file=str(host)))
    fixes = [f.fix for f in report.findings() if f.fix and "flashinfer-cubin" in f.fix]
    assert fixes and not any("flashinfer-cubin==0.6.16.post3" in fix for fix in fixes)
    assert problems(report) == []
