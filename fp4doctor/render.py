"""The one place that decides how results look: the human report and the JSON document."""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

from fp4doctor import __version__, facts
from fp4doctor.findings import Finding, Status

if TYPE_CHECKING:  # `probe` renders facts without loading the rules
    from fp4doctor.doctor import Report
    from fp4doctor.resolve import Resolution
    from fp4doctor.rules import Evaluation
    from fp4doctor.rules.advisories import Affected

REPORT_SCHEMA_VERSION = 1

MARKS = {Status.PASS: "✓", Status.WARN: "!", Status.FAIL: "✗", Status.ERROR: "✗", Status.SKIP: "-"}
ASCII_MARKS = {
    Status.PASS: "ok",
    Status.WARN: "!!",
    Status.FAIL: "XX",
    Status.ERROR: "XX",
    Status.SKIP: "--",
}
COLORS = {
    Status.PASS: "32",
    Status.WARN: "33",
    Status.FAIL: "31",
    Status.ERROR: "31",
    Status.SKIP: "2",
}


@dataclass(frozen=True)
class Style:
    unicode: bool
    color: bool

    @classmethod
    def for_stream(cls, stream: TextIO) -> Style:
        encoding = (getattr(stream, "encoding", None) or "ascii").lower()
        tty = hasattr(stream, "isatty") and stream.isatty()
        return cls(unicode="utf" in encoding, color=tty and "NO_COLOR" not in os.environ)

    def mark(self, status: Status) -> str:
        text = (MARKS if self.unicode else ASCII_MARKS)[status]
        return f"\033[{COLORS[status]}m{text}\033[0m" if self.color else text

    def bold(self, text: str) -> str:
        return f"\033[1m{text}\033[0m" if self.color else text


def summary_counts(findings: list[Finding]) -> dict[str, int]:
    counts = Counter(f.status.value for f in findings)
    return {s.value: counts.get(s.value, 0) for s in Status}


def host_line(host: facts.HostFacts) -> str:
    if not host.gpus:
        return "no GPU"
    kinds = Counter(f"{g.name} ({g.cc_text})" for g in host.gpus)
    return ", ".join(f"{n}× {k}" for k, n in kinds.items())


def human(report: Report, *, verbose: bool, style: Style) -> str:
    """The report for people: host, backends, environment, live results, the choice."""
    from fp4doctor.doctor import Outcome

    evaluation, resolution, smoke_note = report.evaluation, report.resolution, report.smoke_note
    out: list[str] = []
    engine = evaluation.engine
    how = {"installed": "installed"}.get(engine.source, engine.source)
    out.append(
        style.bold(
            f"fp4doctor {__version__} · {evaluation.engine_label} ({how}) · "
            f"{host_line(evaluation.facts)}"
        )
    )
    if engine.note:
        out.append(f"  note: {engine.note}")
    if evaluation.era.note:
        out.append(f"  {evaluation.engine_label}: {evaluation.era.note}")

    def block(title: str, findings: Sequence[Finding], passes: bool = False) -> None:
        shown = [f for f in findings if verbose or passes or f.status is not Status.PASS]
        if not shown:
            return
        out.append("")
        out.append(style.bold(title))
        for f in shown:
            out.extend(_finding_lines(f, style, verbose))

    block("Host", evaluation.host)
    out.append("")
    out.append(style.bold("Backends") + ("" if verbose else "  (-v for every check)"))
    width = max(len(n) for n in evaluation.verdicts)
    for name, verdict in evaluation.verdicts.items():
        backend = evaluation.profile.backends[name]
        problem = verdict.first_problem()
        warns = [f for f in verdict.findings if f.status is Status.WARN]
        status = Status.FAIL if problem else (Status.WARN if warns else Status.PASS)
        kind = "" if backend.native else " (not native FP4)"
        text = f"valid here{kind}: {backend.summary}" if problem is None else problem.reason
        out.append(f"  {style.mark(status)} {name.ljust(width)}  {text}")
        if problem is not None and problem.fix and not verbose:
            out.append(f"      {''.ljust(width)}fix: {problem.fix}")
        # Without -v: the warnings, and the live results (evidence either way).
        details = (
            verdict.findings
            if verbose
            else [
                f
                for f in verdict.findings
                if f is not problem and (f.status is Status.WARN or f.id.startswith("smoke."))
            ]
        )
        for f in details:
            if f is problem and not verbose:
                continue
            out.extend(_finding_lines(f, style, verbose, indent=6 + width))
    block("Environment", evaluation.env_findings)
    if smoke_note:
        out.append("")
        out.append(style.bold("Live smoke GEMM"))
        out.append(f"  {smoke_note}")
    # A live result is evidence, shown even when it passed.
    block("Live smoke GEMM (fp4doctor's own pipeline)", evaluation.smoke, passes=True)
    out.append("")
    out.append(style.bold("Choice"))
    for f in resolution.findings:
        if f.id == "resolve.choice" and f.status is Status.PASS:
            out.append(f"  → {resolution.chosen}: {_knob_text(evaluation, resolution)}")
        else:
            out.extend(_finding_lines(f, style, verbose))
    for note in resolution.notes:
        out.append(f"    {note}")
    counts = summary_counts(report.findings())
    verdict_text = {
        Outcome.READY: f"READY: use {resolution.chosen}",
        Outcome.NOT_READY: "NOT READY",
        Outcome.NO_VERDICT: "NO VERDICT",
    }[report.outcome]
    if report.outcome is Outcome.NOT_READY and resolution.ready:
        verdict_text += f' as set (eval "$(fp4doctor env)" switches to {resolution.chosen})'
    out.append("")
    out.append(
        style.bold(
            f"{verdict_text}. Checks: {counts['pass']} passed, {counts['warn']} warnings, "
            f"{counts['fail'] + counts['error']} failed, {counts['skip']} skipped"
        )
    )
    return "\n".join(out) + "\n"


def _knob_text(evaluation: Evaluation, resolution: Resolution) -> str:
    if resolution.knob is None or resolution.chosen is None:
        return f"{evaluation.engine_label} picks it by itself"
    return resolution.knob.how(resolution.chosen) + '  (eval "$(fp4doctor env)")'


def _finding_lines(f: Finding, style: Style, verbose: bool, indent: int = 2) -> list[str]:
    pad = " " * indent
    lines = [f"{pad}{style.mark(f.status)} {f.reason}"]
    if verbose:
        lines[0] += f"  [{f.id}]"
    if f.fix and f.status is not Status.PASS:
        lines.append(f"{pad}    fix: {f.fix}")
    if verbose and f.source:
        lines.append(f"{pad}    source: {f.source}")
    return lines


def document(report: Report) -> dict[str, Any]:
    """The JSON report: versioned, with every finding."""
    evaluation, resolution = report.evaluation, report.resolution
    findings = report.findings()
    host = evaluation.facts
    return {
        "schema_version": REPORT_SCHEMA_VERSION,
        "fp4doctor_version": __version__,
        "target": evaluation.profile.target,
        "engine": {
            "package": evaluation.profile.engine.package,
            "version": evaluation.engine.version,
            "source": evaluation.engine.source,
            "note": evaluation.engine.note,
            "era": str(evaluation.era.versions),
        },
        "host": {
            # No UUIDs: a report is pasted into tickets (`probe --json` redacts them too).
            "gpus": [{**facts.to_dict(g), "uuid": None} for g in host.gpus],
            "nvml_status": host.nvml.status,
            "cuda_visible_devices": host.cuda_visible_devices,
            "synthetic": host.synthetic,
        },
        "ready": report.ready,
        "outcome": report.outcome.value,
        "exit_code": report.outcome.exit_code,
        "summary": summary_counts(findings),
        "backends": {
            name: {
                "valid": v.valid,
                "native": evaluation.profile.backends[name].native,
                "summary": evaluation.profile.backends[name].summary,
                "problem": (p.reason if (p := v.first_problem()) else None),
            }
            for name, v in evaluation.verdicts.items()
        },
        "engine_auto": evaluation.engine_auto,
        "resolution": resolution.to_dict(),
        "findings": [f.to_dict() for f in findings],
    } | ({"smoke_note": report.smoke_note} if report.smoke_note else {})


def dumps(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def facts_text(host: facts.HostFacts) -> str:
    """`fp4doctor probe` for people: the facts that decide FP4 backends, one per line."""
    lines = [f"fp4doctor {__version__} probe" + (f" · {host.hostname}" if host.hostname else "")]
    nvml = host.nvml
    if host.gpus:
        lines.append(
            f"GPUs          driver {nvml.driver_version}, CUDA driver {nvml.cuda_driver_version}"
        )
        for g in host.gpus:
            mem = f", {g.memory_total_mib} MiB" if g.memory_total_mib else ""
            lines.append(f"  GPU {g.index}       {g.name}, compute capability {g.cc_text}{mem}")
    else:
        lines.append(f"GPUs          none ({nvml.status}: {nvml.error or 'no GPU listed'})")
        if nvml.fix:
            lines.append(f"              fix: {nvml.fix}")
    if host.cuda_visible_devices is not None:
        lines.append(f"CUDA_VISIBLE_DEVICES  {host.cuda_visible_devices!r}")
    p = host.packages
    for name, version in sorted(p.versions.items()):
        lines.append(f"{name:<24} {version}")
    if p.torch_cuda or p.versions.get("torch"):
        lines.append(f"{'torch CUDA':<24} {p.torch_cuda or 'none (CPU build)'}")
    fe = host.cudnn.frontend
    lines.append(
        f"{'cuDNN (frontend loads)':<24} "
        + (
            f"{fe.version_text} from {fe.path}"
            if fe.version
            else f"none ({fe.error or 'not found'})"
        )
    )
    if host.cudnn.torch is not None:
        t = host.cudnn.torch
        lines.append(f"{'cuDNN (torch)':<24} {t.version_text or t.error} from {t.path}")
    tc = host.toolchain
    lines.append(
        f"{'nvcc':<24} " + (f"{tc.nvcc_version} at {tc.nvcc_path}" if tc.nvcc_path else "not found")
    )
    lines.append(f"{'ninja':<24} {tc.ninja_path or 'not found'}")
    for name, value in sorted(host.env.items()):
        lines.append(f"env {name}={value}")
    for name, reason in sorted(host.probe_errors.items()):
        lines.append(f"probe {name} failed: {reason}")
    return "\n".join(lines) + "\n"


def advisories_text(found: list[Affected]) -> str:
    """`fp4doctor advisories` for people: one block per known bug that affects this host."""
    from fp4doctor.versions import spec_text

    if not found:
        return "No known FP4 bug affects this host's packages and GPUs.\n"
    lines = [f"{len(found)} known FP4 bug(s) affect this host:"]
    for a in found:
        issue = a.issue
        where = f" on GPU {', '.join(map(str, a.gpus))}" if a.gpus else ""
        lines.append("")
        lines.append(
            f"{issue.effect.upper()} ({issue.family}): {', '.join(issue.backends)} with "
            f"{issue.package} {spec_text(issue.versions)}{where}  [{issue.id}]"
        )
        lines.append(f"  {issue.reason}")
        if issue.shapes:
            lines.append(f"  when: {issue.shapes}")
        fix = issue.workaround or (
            f"pip install -U '{issue.package}>={issue.fixed_in}'" if issue.fixed_in else None
        )
        if fix:
            lines.append(f"  fix: {fix}")
        lines.append(f"  source: {issue.source}")
    return "\n".join(lines) + "\n"
