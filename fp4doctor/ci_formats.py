"""The report in the formats CI systems render themselves: JUnit XML (`check --format junit`,
read by GitLab, Jenkins and most CI servers) and GitHub Actions workflow commands with a
Markdown step summary (`check --format github`).

JUnit: one `<testcase>` per check (finding), `name` its id (docs/checks.md), `classname`
`<target>.<backend or group>[.gpuN]` (Jenkins shows the part before the last dot as the
package). A case fails (`<failure>` for `fail`, `<error>` for `error`) exactly when its finding
decides "not ready" (`Report.blocking`): a ready host has no failing case, so Jenkins does not
mark the build unstable nor GitLab show failed tests. A check that fails without deciding the
answer (a backend that is not chosen) is `<skipped>`, its message saying so and its reason in
`<system-out>`; `skip` is `<skipped>` too, `warn` passes with its reason in `<system-out>`. One
more case, `fp4doctor.outcome`, carries the answer itself: it fails unless the host is ready, so
that the job's test view and its exit code agree. Each backend's cases are in a `<testsuite>` of
their own, named "(chosen)" or "(not chosen)". Every suite has a `timestamp` (UTC, the second
the report was written, or $SOURCE_DATE_EPOCH when set, for reproducible output) and a
`hostname`, redacted as `probe --json` redacts the facts (`<redacted>`): the XML is an
artifact CI keeps and shows.

GitHub: an `::error` for each finding that decides "not ready" (`Report.blocking`) and for
nothing else, a `::warning` for each warning that stands or belongs to a chosen backend (of any
family), and one `::notice`
or `::error` titled `fp4doctor` with the answer; then the human report inside a collapsed group,
between `::stop-commands::` markers so that nothing in it (a GPU name from a facts file) is read
as a command. Values are escaped as actions/toolkit does (packages/core/src/command.ts:
`escapeData` turns % CR LF into %25 %0D %0A; `escapeProperty` also : and , into %3A %2C).
"""

from __future__ import annotations

import os
import re
import secrets
import stat
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from typing import TYPE_CHECKING

from fp4doctor import render
from fp4doctor.facts import REDACTED
from fp4doctor.findings import Finding, Status
from fp4doctor.profile.model import FAMILY_TITLES
from fp4doctor.terminal import clean

if TYPE_CHECKING:
    from fp4doctor.doctor import Report

OUTCOME_ID = "fp4doctor.outcome"  # the JUnit case and GitHub title of the answer itself
# GitHub shows only the first annotations of each kind per step (10, per its docs on annotation
# limits; unverified here): the rest are counted, and all are in the step summary.
ANNOTATIONS_PER_KIND = 10

# Characters XML 1.0 cannot carry at all (even as a reference): C0 controls but tab, newline
# and carriage return, surrogates, U+FFFE and U+FFFF.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


class SummaryError(OSError):
    """The step summary could not be appended (the path is not a regular file, or unwritable)."""


# --- JUnit XML ---------------------------------------------------------------------------------


def _xml_text(text: object) -> str:
    """Text as XML can carry it: control characters as escapes (`terminal.clean`), then what XML
    1.0 forbids outright as `\\uNNNN`."""
    return _NOT_XML.sub(lambda m: f"\\u{ord(m.group()):04x}", clean(text))


def _classname(target: str, f: Finding) -> str:
    group = f.backend or f.kind.value
    return ".".join([target, group] + ([f"gpu{f.gpu}"] if f.gpu is not None else []))


# How a case is shown: its finding's status, or NOT_DECIDING for a failure or error that does not
# decide the answer (it is not among `Report.blocking`), which is a skipped case.
NOT_DECIDING = "not deciding"
Shown = Status | str
Case = tuple[str, str, Shown, str]  # classname, name, how it is shown, the text


def _case(parent: ET.Element, classname: str, name: str, shown: Shown, text: str) -> None:
    case = ET.SubElement(parent, "testcase", classname=_xml_text(classname), name=_xml_text(name))
    case.set("time", "0")
    message = _xml_text(text.splitlines()[0] if text else "")
    if shown is Status.FAIL:
        ET.SubElement(case, "failure", message=message, type="fail").text = _xml_text(text)
    elif shown is Status.ERROR:
        ET.SubElement(case, "error", message=message, type="error").text = _xml_text(text)
    elif shown is Status.SKIP:
        ET.SubElement(case, "skipped", message=message)
    elif shown == NOT_DECIDING:
        ET.SubElement(case, "skipped", message=_xml_text(f"does not decide the answer: {message}"))
        ET.SubElement(case, "system-out").text = _xml_text(f"not valid here: {text}")
    elif shown is Status.WARN:
        ET.SubElement(case, "system-out").text = _xml_text(f"warning: {text}")


def _detail(f: Finding) -> str:
    lines = [f.reason]
    if f.fix:
        lines.append(f"fix: {f.fix}")
    if f.source:
        lines.append(f"source: {f.source}")
    return "\n".join(lines)


def _counts(cases: list[Case]) -> dict[str, str]:
    """The counts a suite (or the whole document) carries, as attributes."""
    return {
        "tests": str(len(cases)),
        "failures": str(sum(1 for c in cases if c[2] is Status.FAIL)),
        "errors": str(sum(1 for c in cases if c[2] is Status.ERROR)),
        "skipped": str(sum(1 for c in cases if c[2] in (Status.SKIP, NOT_DECIDING))),
    }


def _suite(parent: ET.Element, name: str, cases: list[Case], stamp: dict[str, str]) -> None:
    suite = ET.SubElement(parent, "testsuite", {"name": _xml_text(name), **_counts(cases)})
    for key, value in (("time", "0"), *stamp.items()):
        suite.set(key, value)
    for case in cases:
        _case(suite, *case)


def _timestamp() -> str:
    """Now, in UTC, as JUnit's `timestamp` (ISO 8601 with no zone); $SOURCE_DATE_EPOCH wins
    (reproducible builds' convention), so that the same input can give the same bytes."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "")
    seconds = int(epoch) if epoch.isdigit() else int(time.time())
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))


def junit(report: Report) -> str:
    """The report as JUnit XML: ASCII only (other characters as references), so that any stream
    carries it and the UTF-8 declaration holds."""
    target, label = report.profile.target, report.engine_label
    backends = {b for p in report.families for b in p.evaluation.verdicts}
    chosen = {p.resolution.chosen for p in report.families}
    blocking = report.blocking()
    suites: dict[str, list[Case]] = {}
    answer = _answer(report)
    ok = report.ready
    suites[f"fp4doctor check: {label}"] = [
        (f"{target}.fp4doctor", OUTCOME_ID, Status.PASS if ok else Status.FAIL, answer)
    ]
    for f in report.findings():
        if f.backend in backends and f.backend not in chosen:
            title = f"{label}: {f.backend} (not chosen)"
        elif f.backend in backends:
            title = f"{label}: {f.backend} (chosen)"
        else:
            title = f"{label}: {f.kind.value}"
        shown: Shown = f.status
        if f.status.blocking and f not in blocking:
            shown = NOT_DECIDING
        suites.setdefault(title, []).append((_classname(target, f), f.id, shown, _detail(f)))
    root = ET.Element("testsuites", name="fp4doctor")
    all_cases = [c for cases in suites.values() for c in cases]
    for key, value in _counts(all_cases).items():
        root.set(key, value)
    root.set("time", "0")
    stamp = {"timestamp": _timestamp(), "hostname": REDACTED}
    for name, cases in suites.items():
        _suite(root, name, cases, stamp)
    ET.indent(root)
    raw: bytes = ET.tostring(root, encoding="us-ascii", xml_declaration=False)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + raw.decode("ascii") + "\n"


def _answer(report: Report) -> str:
    """The answer in one line, then what decides it."""
    outcome = report.outcome
    head = render.headline(report)
    why = [f"{f.reason} [{f.id}]" for f in report.blocking()]
    return "\n".join([f"{head} (exit code {outcome.exit_code})", *why])


# --- GitHub Actions ------------------------------------------------------------------------------


def escape_data(text: str) -> str:
    """A workflow command's message, as actions/toolkit's `escapeData` writes it."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A workflow command's property value (`title=`), as toolkit's `escapeProperty` writes it."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def command(kind: str, message: str, title: str | None = None) -> str:
    """One workflow command line: `::error title=...::message`."""
    props = f" title={escape_property(clean(title))}" if title else ""
    return f"::{kind}{props}::{escape_data(clean(message))}\n"


_GPU_NUMBER = re.compile(r"\bGPU \d+")
_GPU_SUFFIX = re.compile(r"\.gpu\d+$")


def _once(findings: Iterable[Finding]) -> list[tuple[Finding, str]]:
    """Each problem once, however many GPUs it is found on: the first finding and the title to
    give it (its id, without the GPU suffix when several GPUs share it)."""
    groups: dict[tuple[str | None, str], list[Finding]] = {}
    for f in findings:
        what = f.advisory or _GPU_NUMBER.sub("GPU", f.reason)
        groups.setdefault((f.backend, what), []).append(f)
    out = []
    for found in groups.values():
        first = found[0]
        title = first.id if len(found) == 1 else _GPU_SUFFIX.sub("", first.id)
        out.append((first, title))
    return out


def _annotations(kind: str, findings: Iterable[Finding]) -> list[str]:
    found = _once(findings)
    lines = [command(kind, _detail(f), title=t) for f, t in found[:ANNOTATIONS_PER_KIND]]
    if len(found) > ANNOTATIONS_PER_KIND:
        more = len(found) - ANNOTATIONS_PER_KIND
        lines.append(command(kind, f"and {more} more: see the job summary", title="fp4doctor"))
    return lines


def github(report: Report, human_report: str) -> str:
    """Workflow commands for the report, then `human_report` in a collapsed group that the runner
    does not read commands from."""
    chosen = {None, *(p.resolution.chosen for p in report.families)}
    blocking = report.blocking()
    warnings = [
        f
        for f in report.findings()
        if f.status is Status.WARN and f.backend in chosen and f not in blocking
    ]
    out = _annotations("error", blocking) + _annotations("warning", warnings)
    out.append(command("notice" if report.ready else "error", _answer(report), title="fp4doctor"))
    token = secrets.token_hex(16)  # unguessable: no text in the report can resume commands
    out.append("::group::fp4doctor report\n")
    out.append(f"::stop-commands::{token}\n")
    out.append(human_report if human_report.endswith("\n") else human_report + "\n")
    out.append(f"::{token}::\n")
    out.append("::endgroup::\n")
    return "".join(out)


def _md(text: object) -> str:
    """Text for a Markdown table cell: one line, `|` escaped, HTML's own characters as entities."""
    text = clean(text).replace("\n", " ")
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace("|", "\\|").replace("`", "\\`")


def step_summary(report: Report) -> str:
    """The job summary: the answer, what decides it, and one row per backend."""
    from fp4doctor.doctor import Outcome

    no_verdict = report.outcome is Outcome.NO_VERDICT
    answer = _answer(report).splitlines()
    lines = [
        f"### fp4doctor: {_md(answer[0])}",
        "",
        f"{_md(report.engine_label)} on {_md(render.host_line(report.facts, unknown=no_verdict))}",
        "",
    ]
    lines += [f"- {_md(why)}" for why in answer[1:]]
    if answer[1:]:
        lines.append("")
    for part in report.families:  # the dense linear GEMM, then the MoE experts when judged
        if len(report.families) > 1:
            lines += [f"#### {_md(FAMILY_TITLES.get(part.family, part.family))}", ""]
        lines += ["| backend | verdict | why |", "| --- | --- | --- |"]
        for name, verdict in part.evaluation.verdicts.items():
            problem = verdict.first_problem()
            if no_verdict:
                mark, why = "unknown", render.NO_VERDICT_TEXT
            elif problem is None:
                mark, why = "valid", part.evaluation.profile.backends[name].summary
            else:
                mark, why = "not valid", problem.reason
            if name == part.resolution.chosen and not no_verdict:
                mark += " (chosen)"
            lines.append(f"| {_md(name)} | {mark} | {_md(why)} |")
        lines.append("")
    counts = render.summary_counts(report.findings())
    lines += [
        f"Checks: {counts['pass']} passed, {counts['warn']} warned, "
        f"{counts['fail'] + counts['error']} failed, {counts['skip']} skipped "
        "(`fp4doctor check -v` lists them).",
        "",
    ]
    return "\n".join(lines)


def append_step_summary(path: str, text: str) -> None:
    """Append `text` to the file GitHub names in $GITHUB_STEP_SUMMARY, in one write to a regular
    file opened for appending: nothing is replaced, and the summaries of earlier steps stay. A
    path that is not a regular file (a FIFO, a device) is left alone: SummaryError, as for any
    file that cannot be written."""
    where = f"$GITHUB_STEP_SUMMARY ({path})"
    # O_NONBLOCK: a FIFO with no reader fails at once instead of hanging the step.
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        raise SummaryError(f"cannot append to {where}: {exc.strerror or exc}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise SummaryError(f"{where} is not a regular file: the summary was not written")
        data, written = text.encode("utf-8"), 0
        while written < len(data):
            written += os.write(fd, data[written:])
    except SummaryError:
        raise
    except OSError as exc:
        raise SummaryError(f"cannot append to {where}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
