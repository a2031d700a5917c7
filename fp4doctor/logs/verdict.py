"""A log's verdict against fp4doctor's prediction for the host (or --facts): the kernels it
says ran, its errors with their diagnosis, and the exit code.

Never passes what it did not verify: a log that names no kernel and no error (empty, a binary,
a vLLM log at WARNING level, another program's output) is no verdict (exit 3), with what would
have made it verifiable. Any error line is not ready (exit 1), known or not.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from fp4doctor.findings import Finding, Kind, Status
from fp4doctor.logs import failures, layers
from fp4doctor.logs.reading import Reading
from fp4doctor.logs.signatures import Signature
from fp4doctor.oracle import startup_log
from fp4doctor.selection.engine import engine_auto

if TYPE_CHECKING:
    from fp4doctor.doctor import Report
    from fp4doctor.profile.advisories import KnownIssue

EXIT_AGREED, EXIT_NOT_AGREED, EXIT_NO_VERDICT = 0, 1, 3
SHOWN = 20  # causes shown; the rest are counted

# What each engine needs to write the lines verify-log reads (docs/verify-log.md).
HOW_TO_LOG = (
    "vLLM writes its kernel lines at INFO (unset VLLM_LOGGING_LEVEL or set it to INFO; DEBUG adds "
    "each MoE backend it skipped, VLLM_LOG_MODEL_INSPECTION=1 the module tree); SGLang writes "
    "server_args at INFO (--log-level info, its default). `fp4doctor env --log-kernels` prints "
    "the settings"
)


@dataclass
class Verdict:
    findings: list[Finding]
    exit_code: int
    notes: list[str] = field(default_factory=list)  # for stderr: what was left unread
    table: list[layers.Row] = field(default_factory=list)  # per layer class, what ran


def judge(reading: Reading, report: Report | None) -> Verdict:
    """The findings and exit code for `reading`; `report` is fp4doctor's prediction (None: only
    the errors are judged, as for a traceback read without a host)."""
    t = reading.tally
    if t.binary and t.binary * 10 >= t.lines:  # a NUL in one line in ten or more: a binary
        return Verdict([_nothing(reading)], EXIT_NO_VERDICT, _notes(reading))
    out: list[Finding] = []
    notes = _notes(reading)
    table = layers.rows(reading.tree, reading.ran, reading.refused, reading.sglang)
    if report is not None:
        out += _kernels(reading, report)
        table = _resolved(table, report)
        out += _per_layer(table, report, notes)
    shown = reading.failures[:SHOWN]
    for f in shown:
        out.append(_failure(f, reading, report))
    if len(reading.failures) > SHOWN or reading.causes_dropped:
        more = len(reading.failures) - SHOWN + reading.causes_dropped
        notes.append(f"{more} more distinct errors are not shown")
    if out:
        blocking = any(f.status.blocking for f in out)
        return Verdict(out, EXIT_NOT_AGREED if blocking else EXIT_AGREED, notes, table)
    return Verdict([_nothing(reading)], EXIT_NO_VERDICT, notes, table)


def _resolved(table: list[layers.Row], report: Report) -> list[layers.Row]:
    """SGLang's rows with fp4doctor's backend for its knob value (`auto`: the engine's own
    pick as the rules predict it)."""
    from dataclasses import replace

    parts = {p.family: p for p in report.families}
    out = []
    for row in table:
        part = parts.get(row.family)
        if row.backend is None and row.kernel is not None and part is not None:
            row = replace(row, backend=startup_log.knob_backend(part.evaluation, row.kernel))
        out.append(row)
    return out


def _per_layer(table: list[layers.Row], report: Report, notes: list[str]) -> list[Finding]:
    """Each row against `explain --model`'s prediction for its layer class: `log.layer.CLASS`,
    fail where the kernel differs. Without --model there is nothing per layer to compare."""
    if not table:
        return []
    if report.model is None:
        notes.append("pass --model (the checkpoint) to compare each layer class with `explain`")
        return []
    from fp4doctor.selection.explain import explain

    predicted = [(e.gemm.layer.name, e.gemm.layer.family, e.engine_pick) for e in explain(report)]
    out = []
    for row in table:
        if row.backend is None:
            continue
        if row.layer.startswith("all "):  # SGLang: one row per family
            mine = [p for p in predicted if p[1] == row.family]
        else:
            mine = [p for p in predicted
                    if p[0] == row.layer or p[0].startswith(f"{row.layer}.")]  # fmt: skip
        if not mine:
            notes.append(f"layer class {row.layer}: `explain` has no NVFP4 layer of this class")
            continue
        differ = sorted({f"{name}: {pick or 'none'}" for name, _, pick in mine
                         if pick != row.backend})  # fmt: skip
        said = (f"layer class {row.layer} ({row.modules or 'all'} modules, {row.scheme}): the log "
                f"says {report.engine_label} ran {row.backend} ({row.kernel})")  # fmt: skip
        if differ:
            out.append(
                Finding(
                    f"log.layer.{row.layer}",
                    Status.FAIL,
                    f"{said}; `explain --model` predicts {', '.join(differ)}",
                    fix="fp4doctor explain --model ... (each candidate and why it was skipped)",
                    backend=row.backend,
                    kind=Kind.ENGINE_PICK,
                    family=row.family,
                )
            )
        else:
            out.append(Finding(f"log.layer.{row.layer}", Status.PASS,
                               f"{said}, as `explain --model` predicts", backend=row.backend,
                               kind=Kind.ENGINE_PICK, family=row.family))  # fmt: skip
    return out


def _notes(reading: Reading) -> list[str]:
    t = reading.tally
    notes = []
    if t.cut:
        notes.append(f"{t.cut} lines longer than {_kib()} KiB were read in part")
    if t.stopped:
        notes.append(f"stopped after {t.lines} lines: the rest of the log was not read")
    if t.timed_out:
        notes.append("--follow: the time limit passed before the engine finished starting")
    return notes


def _kib() -> int:
    from fp4doctor.logs.source import LINE_CAP

    return LINE_CAP // 1024


def _nothing(reading: Reading) -> Finding:
    t = reading.tally
    if t.binary and (reading.text_lines == 0 or t.binary * 10 >= t.lines):
        why = f"not a text log ({t.binary} of {t.lines} lines hold NUL bytes): no verdict"
    elif reading.empty:
        why = "the log is empty: no verdict"
    elif reading.vllm_lines and not reading.levels.get("INFO") and not reading.levels.get("DEBUG"):
        levels = ", ".join(sorted(reading.levels))
        why = (
            f"a vLLM log with no INFO line ({levels} only): vLLM names its NVFP4 kernels at "
            "INFO, so nothing could be verified; run with VLLM_LOGGING_LEVEL=INFO (the default)"
        )
    else:
        why = (
            f"{reading.text_lines} lines name no NVFP4 kernel and no error: is it the engine's "
            "start-up log, at INFO level? " + HOW_TO_LOG
        )
    return Finding("log.none", Status.ERROR, why, kind=Kind.ENGINE)


def _kernels(reading: Reading, report: Report) -> list[Finding]:
    out: list[Finding] = []
    parts = {p.family: p for p in report.families}
    seen: dict[tuple[str, str, str], int] = {}
    for r in reading.ran:
        k = (r.engine, r.family, r.engine_name)
        seen[k] = seen.get(k, 0) + 1
        if seen[k] > 1:
            continue
        part = parts.get(r.family)
        if part is None:
            continue
        evaluation, chosen = part.evaluation, part.resolution.chosen
        backend = startup_log.backend_of(r) or startup_log.knob_backend(evaluation, r.engine_name)
        said = f"log line {r.line}: {r.engine} ran {backend or r.engine_name} ({r.engine_name})"
        own = engine_auto(evaluation)
        if backend is not None and backend == chosen:
            status, reason, fix = Status.PASS, f"{said}, as fp4doctor predicts", None
        else:
            why = f"fp4doctor chooses {chosen or 'no backend'} on this host" + (
                f" (the engine's own pick as set: {own})" if own and own != chosen else ""
            )
            if backend is not None and not evaluation.valid(backend):
                why += f"; {backend} cannot run here"
            status, reason, fix = Status.FAIL, f"{said}; {why}", 'eval "$(fp4doctor env)"'
        out.append(
            Finding(
                f"log.{r.family}",
                status,
                reason,
                fix=fix,
                backend=backend,
                kind=Kind.ENGINE_PICK,
                family=r.family,
            )
        )
    return out


def _failure(f: failures.Failure, reading: Reading, report: Report | None) -> Finding:
    where = f"log line {f.first.number}"
    if f.count > 1:
        where += f" (and {f.count - 1} more"
        where += f", {len(f.sources)} processes)" if len(f.sources) > 1 else ")"
    said = f"{where}: {f.quote!r}"
    details: dict[str, object] = {"line": f.first.number, "count": f.count, "text": f.quote}
    if f.frame is not None:
        said += f" at {f.frame}"
        details["frame"] = str(f.frame)
    found = diagnose(f, reading, report)
    if found is None:
        title = failures.CLASS_TITLES.get(f.cause, f.cause)
        reason = f"{said}: {title}, no known cause in fp4doctor's knowledge matches it"
        return Finding(
            f"log.error.{f.cause}",
            Status.FAIL,
            reason,
            fix="read the frame quoted and the lines before it; `fp4doctor check` for the host",
            details=details | {"diagnosed": None},
            kind=Kind.ENGINE,
        )
    sig, diagnosis, fix, others = found
    checks = f" (tell which: {'; '.join(sig.checks)})" if sig.checks else ""
    also = "".join(f"; {o}" for o in others)
    return Finding(
        f"log.error.{sig.id}",
        Status.FAIL,
        f"{said}: {diagnosis}{checks}{also}",
        fix=fix,
        source=sig.source,
        details=details | {"diagnosed": sig.id},
        kind=Kind.ENGINE,
        advisory=sig.advisory,
    )


def diagnose(
    f: failures.Failure, reading: Reading, report: Report | None
) -> tuple[Signature, str, str | None, list[str]] | None:
    """The signature that explains `f` (None: no known cause), its diagnosis and fix, and notes
    on the other known errors with the same text. An advisory explains it where its version
    range and GPUs hold for the log's install; else a class of cause of the same text does,
    with the advisories of other versions named; else the first advisory, said to be of
    another version or not verifiable here."""
    by_id = {s.id: s for s in reading.known}
    sigs = [by_id[c] for c in f.candidates if c in by_id]
    if not sigs:
        return None
    judged = [(s, *_diagnosis(s, reading, report)) for s in sigs]
    holds = [j for j in judged if j[4] == "holds"]
    classes = [j for j in judged if j[0].advisory is None]
    chosen = (holds or classes or judged)[0]
    others = [j[1] for j in judged if j is not chosen and j[0].advisory is not None]
    return chosen[0], chosen[1], chosen[2], others


def _diagnosis(
    sig: Signature, reading: Reading, report: Report | None
) -> tuple[str, str | None, str | None, str]:
    """(diagnosis, fix, advisory id, state): state 'holds', 'other', 'unknown' for an
    advisory, 'class' for a class of cause."""
    if sig.advisory is None:
        return sig.diagnosis or "", sig.fix, None, "class"
    from fp4doctor.profile import known_issues

    issue = next((i for i in known_issues() if i.id == sig.advisory), None)
    if issue is None:  # validated at test time; a user's edited file may still name none
        said = sig.diagnosis or f"the known error {sig.advisory}"
        return said, sig.fix, sig.advisory, "unknown"
    fix = sig.fix or issue.advisory().fix
    text = sig.diagnosis or issue.reason
    scope = f"{issue.package} {issue.versions}" + (
        f", sm{'/'.join(str(c) for c in issue.compute_capability)}"
        if issue.compute_capability
        else ""
    )
    state, here = _applies(issue, reading, report)
    if state == "holds":
        said = f"the known error {issue.id} ({scope}; here {here}): {text}"
    elif state == "other":
        said = (
            f"the text of the known error {issue.id} of another version or GPU ({scope}; here "
            f"{here}): the cause here may differ, or the log comes from another install "
            "(judge that one with --facts)"
        )
    else:
        said = (
            f"the text of the known error {issue.id} ({scope}; here {here}: pass --facts of "
            f"the install that wrote the log to confirm it): {text}"
        )
    return said, fix, issue.id, state


def _applies(issue: KnownIssue, reading: Reading, report: Report | None) -> tuple[str, str]:
    """Whether the advisory's version range and GPUs hold for the log's install: 'holds',
    'other' (they do not) or 'unknown', and what was compared."""
    package = canonicalize_name(issue.package)
    version = None
    said = "not known"
    if package == "vllm" and reading.engine_version:
        version, said = reading.engine_version, f"the log's vLLM {reading.engine_version}"
    elif report is not None:
        versions = {canonicalize_name(k): v for k, v in report.facts.packages.versions.items()}
        if report.profile.target == package:
            versions[package] = report.engine.version
        version = versions.get(package)
        said = f"{issue.package} {version}" if version else f"{issue.package} not installed"
    if version is None:
        return "unknown", said
    try:
        inside = issue.versions.contains(Version(version), prereleases=True)
    except InvalidVersion:
        return "unknown", said
    if not inside:
        return "other", said
    if issue.compute_capability and report is not None and report.facts.gpus:
        ccs = {g.cc_major * 10 + g.cc_minor for g in report.facts.gpus}
        if not ccs & set(issue.compute_capability):
            gpus = "/".join(f"sm{c}" for c in sorted(ccs))
            return "other", f"{said}, {gpus}"
    return "holds", said
