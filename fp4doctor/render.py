"""The one place that decides how results look: the human report and the JSON document."""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

from fp4doctor import __version__, facts
from fp4doctor.findings import Finding, Kind, Status
from fp4doctor.terminal import clean, encoding_of

if TYPE_CHECKING:  # `probe` renders facts without loading the rules
    from fp4doctor.checkpoint.judge import ModelVerdict
    from fp4doctor.deployment import Deployment
    from fp4doctor.doctor import FamilyPart, Report
    from fp4doctor.rules import Evaluation
    from fp4doctor.rules.advisories import Affected
    from fp4doctor.selection.choice import Resolution

REPORT_SCHEMA_VERSION = 3  # the schema: fp4doctor/schemas/report-v<N>.schema.json

# A backend under NO VERDICT (exit 3): its checks ran against GPUs that could not be listed, so
# it is neither valid nor not valid (human text, and `problem` with `valid: null` in JSON).
NO_VERDICT_TEXT = "unknown: no verdict was reached"

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
    """How marks are drawn: Unicode or ASCII, with colour or without."""

    unicode: bool
    color: bool
    width: int = 80  # columns a line may take (the report is wrapped to fit)

    @classmethod
    def for_stream(cls, stream: TextIO) -> Style:
        """Marks as the stream's encoding can carry them; colour on a terminal unless NO_COLOR is
        set and not empty (no-color.org) or TERM is dumb."""
        tty = hasattr(stream, "isatty") and stream.isatty()
        color = tty and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"
        # A terminal's own width; 80 columns in a pipe or a file.
        width = shutil.get_terminal_size((80, 24)).columns if tty else 80
        return cls(unicode=encoding_of(stream).startswith("utf"), color=color, width=width)

    def mark(self, status: Status) -> str:
        text = (MARKS if self.unicode else ASCII_MARKS)[status]
        return f"\033[{COLORS[status]}m{text}\033[0m" if self.color else text

    def bold(self, text: str) -> str:
        """`text` in bold: text from outside is escaped (`clean`) first, the bold added after."""
        text = clean(text)
        return f"\033[1m{text}\033[0m" if self.color else text


def summary_counts(findings: list[Finding]) -> dict[str, int]:
    counts = Counter(f.status.value for f in findings)
    return {s.value: counts.get(s.value, 0) for s in Status}


def host_line(host: facts.HostFacts, *, unknown: bool = False) -> str:
    """The GPUs in a few words; `unknown` when NVML could not tell (no verdict), not "no GPU"."""
    if not host.gpus:
        return f"GPUs unknown (NVML: {host.nvml.status})" if unknown else "no GPU"
    kinds = Counter(f"{g.name} ({g.cc_text})" for g in host.gpus)
    return ", ".join(f"{n}× {k}" for k, n in kinds.items())


def headline(report: Report) -> str:
    """The verdict in one line (the report's last line, the CI formats' title): the outcome,
    what each family uses, or which family blocks."""
    from fp4doctor.doctor import Outcome

    parts = report.families
    outcome = report.outcome
    if outcome is Outcome.NO_VERDICT:
        return "NO VERDICT"
    if outcome is Outcome.READY:
        left = "".join(
            f"; the {p.title}, assumed (no model says it runs; name the model to count it), "
            + ("cannot run as set" if _fails_as_set(p) else "has no valid backend")
            for p in report.not_counted()
            if _fails_as_set(p) or p.chosen is None
        )
        return "READY: use " + uses(report) + left
    if not report.verified and report.question.strict:
        return "NOT READY: --strict, and a release judged is newer than the release data"
    if report.env_makes_ready:
        return f'NOT READY as set (eval "$(fp4doctor env)" switches to {uses(report)})'
    blocked = [p for p in report.blocking_families() if p.chosen is None]
    if blocked and len(parts) > 1:
        return "NOT READY: no valid backend for the " + " and the ".join(p.title for p in blocked)
    return "NOT READY"


def _fails_as_set(part: FamilyPart) -> bool:
    as_set = part.resolution.as_set
    return as_set is not None and as_set.runs is False


def uses(report: Report) -> str:
    """`cutlass`, or `cutlass for the dense linear FP4 GEMM, marlin for the fused-MoE ...`: each
    family with a valid choice."""
    parts = [p for p in report.families if p.chosen is not None]
    if len(parts) == 1 and len(report.families) == 1:
        return str(parts[0].chosen)
    return ", ".join(f"{p.chosen} for the {p.title}" for p in parts) or "nothing"


def human(report: Report, *, verbose: bool, style: Style) -> str:
    """The report for people: the host, then each FP4 GEMM family alike (backends, variables,
    live results, choice), then the verdict. Lines fit `style.width` columns."""
    from fp4doctor.doctor import Outcome

    no_verdict = report.outcome is Outcome.NO_VERDICT
    out = _Lines(style, verbose)
    engine = report.engine
    how = {"installed": "installed"}.get(engine.source, engine.source)
    gpus = host_line(report.facts, unknown=no_verdict)
    title = f"fp4doctor {__version__} · {report.engine_label} ({how}) · {gpus}"
    if len(title) > style.width:  # the engine and the GPUs, on one line, before the version
        title = f"{report.engine_label} ({how}) · {gpus} · fp4doctor {__version__}"
    out.heading(title)
    if engine.note:
        out.text(f"note: {engine.note}")
    if not no_verdict:
        _verdict_section(out, report)
    out.block("Host", report.host)
    if report.model is not None:
        out.raw(model_lines(report.model, style, verbose))
    if report.smoke_note and verbose:
        out.gap()
        out.heading("Live smoke GEMM")
        out.text(report.smoke_note)
    titled = len(report.families) > 1 or report.families[0].family != "linear"
    for part in report.families:
        _family_section(out, part, titled, no_verdict)
    if not no_verdict:
        _cold_start_section(out, report)
    counts = summary_counts(report.findings())
    out.gap()
    # The verdict, then the counts on a line of their own: the last line is always the counts.
    # Extrapolated rules: said in the verdict line too, not only among the host's findings.
    said = report.verified or report.question.strict  # --strict's headline says it already
    unverified = "" if said else " (unverified: a release newer than the release data)"
    out.heading(f"{headline(report)}{unverified}.")
    out.heading(
        f"Checks: {counts['pass']} passed, {_count(counts['warn'], 'warning')}, "
        f"{counts['fail'] + counts['error']} failed, {counts['skip']} skipped"
    )
    return "\n".join(out.lines) + "\n"


def _verdict_section(out: _Lines, report: Report) -> None:
    """First: the verdict as set, the one command that fixes it, what blocks, then each family
    as set and the deployment it was judged for."""
    out.gap()
    out.heading(headline(report))
    seen: set[str] = set()
    for f in report.blocking():
        if f.reason in seen:  # the same failure on every GPU is said once
            continue
        seen.add(f.reason)
        out.finding(f)
    out.gap()
    out.heading("As set")
    width = max(len(p.title) for p in report.families)
    for part in report.families:
        as_set = part.resolution.as_set
        counted = "" if part in report.counted else " [assumed: not counted]"
        if as_set is None or as_set.backend is None:
            out.marked(Status.SKIP, f"{part.title.ljust(width)}  no backend{counted}")
            continue
        status = {True: Status.PASS, False: Status.FAIL, None: Status.SKIP}[as_set.runs]
        why = ""
        if as_set.runs is False:
            detail = as_set.reason if out.verbose else "-v: why"
            why = ": cannot run here" + (" (above)" if not counted else f" ({detail})")
        out.marked(
            status,
            f"{part.title.ljust(width)}  {as_set.backend}, by {as_set.by}{why}{counted}",
            hang=width + 2,
        )
        if part.chosen is not None and part.chosen != as_set.backend:
            how = _knob_text(part.evaluation, part.resolution)
            out.text(f"→ best: {part.chosen}, {how}", 4 + width, 2)
    deployment = report.families[0].evaluation.context.deployment
    out.text("deployment: " + deployment_text(deployment, out.verbose))
    for note in deployment.notes:
        out.marked(Status.WARN, note)


def deployment_text(deployment: Deployment, verbose: bool) -> str:
    """`TP 1, EP 1, autotune on, CUDA graphs on`: the settled fields (with -v, where each came
    from); a field nothing settles is "not established"."""
    shown = (("tp", "TP"), ("ep", "EP"), ("autotune", "FlashInfer autotune"),
             ("cuda_graphs", "CUDA graphs"), ("concurrency", "concurrency"))  # fmt: skip
    parts = []
    for field, label in shown:
        value = getattr(deployment, field)
        if value is None:
            parts.append(f"{label} not established")
            continue
        text = ("on" if value else "off") if isinstance(value, bool) else str(value)
        origin = deployment.origin(field)
        parts.append(f"{label} {text}" + (f" ({origin})" if verbose and origin else ""))
    return ", ".join(parts) + ("" if verbose else " (-v: where each comes from)")


class _Lines:
    """The human report as it is built: each line fitted to the width, text from outside
    escaped (`clean`), marks and bold added after the fitting."""

    def __init__(self, style: Style, verbose: bool) -> None:
        self.style, self.verbose = style, verbose
        self.lines: list[str] = []

    def gap(self) -> None:
        self.lines.append("")

    def raw(self, lines: Sequence[str]) -> None:
        self.lines.extend(lines)

    def heading(self, text: str) -> None:
        for line in wrap(clean(text), self.style.width, "", "  "):
            self.lines.append(self.style.bold(line))

    def text(self, text: str, indent: int = 2, hang: int = 2) -> None:
        pad = " " * indent
        self.lines.extend(wrap(clean(text), self.style.width, pad, pad + " " * hang))

    def marked(self, status: Status, text: str, indent: int = 2, hang: int = 0) -> None:
        """A mark, then the text; its continuation lines under the text, `hang` further in."""
        mark = self.style.mark(status)
        width = len((MARKS if self.style.unicode else ASCII_MARKS)[status])
        pad = " " * indent
        rest = " " * (indent + width + 1 + hang)
        lines = wrap(clean(text), self.style.width, pad + "#" * width + " ", rest)
        lines[0] = pad + mark + lines[0][indent + width :]
        self.lines.extend(lines)

    def finding(self, f: Finding, indent: int = 2) -> None:
        self.marked(f.status, f.reason, indent)
        if f.fix and f.status is not Status.PASS:
            self.text(f"fix: {f.fix}", indent + 4, 5)
        if self.verbose:  # the id on its own line: it is what --ignore takes, whole
            self.text(f"id: {f.id}", indent + 4, 4)
        if self.verbose and f.source:
            self.text(f"source: {f.source}", indent + 4, 8)

    def block(self, title: str, findings: Sequence[Finding], passes: bool = False) -> None:
        shown = [f for f in findings if self.verbose or passes or f.status is not Status.PASS]
        if not shown:
            return
        self.gap()
        self.heading(title)
        for f in shown:
            self.finding(f)


def wrap(text: str, width: int, first: str, rest: str) -> list[str]:
    """`text` in lines of at most `width` columns: the first after `first`, the others after
    `rest`; a word longer than a line (an id, a path) is left whole, so it can be copied."""
    import textwrap

    lines: list[str] = []
    for paragraph in text.split("\n"):
        lines += textwrap.wrap(
            paragraph,
            width=max(width, len(rest) + 20),
            initial_indent=first if not lines else rest,
            subsequent_indent=rest,
            break_on_hyphens=False,
            break_long_words=False,  # an id stays whole: it is what --ignore takes
        ) or [first.rstrip()]
    return lines


def _family_section(out: _Lines, part: FamilyPart, titled: bool, no_verdict: bool) -> None:
    """One FP4 GEMM family: its backends, variables, live run of fp4doctor's own pipeline and
    choice. Every family is drawn by this one function."""
    evaluation, resolution = part.evaluation, part.resolution
    title = f" ({part.title})" if titled else ""
    out.gap()
    out.heading(f"Backends{title}" + ("" if out.verbose else "  (-v for every check)"))
    if evaluation.era.note and out.verbose:
        out.text(f"{evaluation.engine_label}: {evaluation.era.note}")
    _backend_rows(out, evaluation, no_verdict)
    out.block(f"Environment{title}", evaluation.env_findings)
    # A live result is evidence, shown even when it passed.
    out.block(f"Live smoke GEMM (fp4doctor's own pipeline){title}", evaluation.smoke, passes=True)
    if not out.verbose and not no_verdict:
        return  # the choice is in the verdict and "As set" sections; -v repeats it here
    out.gap()
    out.heading(f"Choice{title}")
    if no_verdict:
        out.marked(Status.SKIP, "none: no verdict was reached")
    for f in () if no_verdict and not out.verbose else resolution.findings:
        if f.kind is Kind.CHOICE and f.status is Status.PASS:
            out.text(f"→ {resolution.chosen}: {_knob_text(evaluation, resolution)}", 2, 4)
        elif out.verbose or not f.status.blocking:
            out.finding(f)
        elif f.kind is Kind.CHOICE or f.kind is Kind.REQUIRE:
            out.marked(f.status, "no valid backend to choose (the verdict above says why)")
    for note in resolution.notes if out.verbose else ():
        out.text(note, 4, 2)


def _backend_rows(out: _Lines, evaluation: Evaluation, no_verdict: bool) -> None:
    """One line per backend of a family: valid, with its possible problems counted, or its first
    problem. Without -v, the backends this release cannot select and those this GPU cannot run
    are one line each group, and unestablished risks a count; -v shows every finding."""
    verbose = out.verbose
    width = max((len(n) for n in evaluation.verdicts), default=0)
    unselectable: list[str] = []
    other_gpu: list[str] = []
    for name, verdict in evaluation.verdicts.items():
        if no_verdict:  # judged against GPUs nobody could list: neither valid nor not valid
            out.marked(Status.SKIP, f"{name.ljust(width)}  {NO_VERDICT_TEXT}", hang=width + 2)
            for f in verdict.findings if verbose else ():
                out.finding(f, indent=6 + width)
            continue
        backend = evaluation.profile.backends[name]
        problem = verdict.first_problem()
        if problem is not None and not verbose and problem.kind is Kind.KNOB:
            unselectable.append(name)
            continue
        if problem is not None and not verbose and problem.kind is Kind.HARDWARE:
            other_gpu.append(name)
            continue
        warns = [f for f in verdict.findings if f.status is Status.WARN]
        status = Status.FAIL if problem else (Status.WARN if warns else Status.PASS)
        kind = "" if backend.native else " (not native FP4)"
        if problem is not None:
            from fp4doctor.selection.choice import short_reason

            text = problem.reason if verbose else short_reason(problem)
        elif verbose:
            text = f"valid here{kind}: {backend.summary}"
        else:
            text = f"valid here{kind}"
        # Each possible problem once, however many GPUs it is found on.
        possible = list({f.advisory or f.reason: f for f in warns if not f.established})
        if possible and not verbose and problem is None:
            text += f"; {_count(len(possible), 'possible problem')}, not established (-v)"
        out.marked(status, f"{name.ljust(width)}  {text}", hang=width + 2)
        if problem is not None and problem.fix:
            out.text(f"fix: {problem.fix}", 6 + width, 5)
        details = (
            verdict.findings
            if verbose
            else [
                f
                for f in verdict.findings
                if f is not problem
                and ((f.status is Status.WARN and f.established) or f.kind is Kind.LIVE)
            ]
        )
        said: set[str] = set()  # a warning on every GPU is said once
        for f in details:
            if (f is problem or f.reason in said) and not verbose:
                continue
            said.add(f.reason)
            if verbose or f.kind is not Kind.ADVISORY:
                out.finding(f, indent=6 + width)
            else:
                from fp4doctor.selection.choice import short_reason

                out.marked(f.status, short_reason(f), indent=6 + width)
    label = evaluation.engine_label
    if unselectable:
        out.marked(Status.FAIL, f"{label} cannot select: {', '.join(unselectable)} (-v: why)")
    if other_gpu:
        ccs = ", ".join(sorted({g.cc_text for g in evaluation.facts.gpus}))
        where = f"not for compute capability {ccs}" if ccs else "no NVIDIA GPU is visible"
        out.marked(Status.FAIL, f"{where}: {', '.join(other_gpu)} (-v: what each needs)")


# How each cold-start state is marked: a first start that compiles or tunes is a warning.
_COLD_MARKS = {"ready": Status.PASS, "will-build": Status.WARN, "cannot-build": Status.FAIL,
               "off": Status.PASS, "skipped": Status.PASS, "cached": Status.PASS,
               "will-tune": Status.WARN, "unknown": Status.SKIP}  # fmt: skip


def _severity(status: Status) -> int:
    return [Status.SKIP, Status.PASS, Status.WARN, Status.FAIL, Status.ERROR].index(status)


def _cold_start_section(out: _Lines, report: Report) -> None:
    """Per family: will the first start-up compile (JIT) or autotune the chosen backend."""
    parts = [p for p in report.families if p.cold_start is not None]
    if not parts:
        return
    out.gap()
    out.heading("Cold start (first start-up)")
    for part in parts:
        cold = part.cold_start
        assert cold is not None
        jit, tune = cold.jit, cold.autotune
        if not out.verbose:
            worst = max((_COLD_MARKS[jit.state], _COLD_MARKS[tune.state]), key=_severity)
            out.marked(
                worst,
                f"{part.title}, {cold.backend or 'no backend'}: JIT {jit.state}, "
                f"autotune {tune.state} (-v: why)",
            )
            continue
        out.text(f"{part.title}, {cold.backend or 'no backend'}:")
        modules = f" [{', '.join(jit.modules)}]" if jit.modules else ""
        out.marked(_COLD_MARKS[jit.state], f"JIT {jit.state}{modules}: {jit.reason}", 4, 2)
        if jit.estimate:
            out.text(f"reported: {jit.estimate.text()}", 8)
        out.marked(_COLD_MARKS[tune.state], f"autotune {tune.state}: {tune.reason}", 4, 2)
        if tune.cache:
            out.text(f"cache: {tune.cache}", 8)
        if tune.estimate:
            out.text(f"reported: {tune.estimate.text()}", 8)
        if tune.knobs and tune.state in ("will-tune", "cached"):
            out.text(f"knobs: {', '.join(tune.knobs)} (fp4doctor env --cold-start)", 8)
        for source in (jit.source, tune.source) if out.verbose else ():
            if source:
                out.text(f"source: {source}", 8)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _knob_text(evaluation: Evaluation, resolution: Resolution) -> str:
    if resolution.knob is None or resolution.chosen is None:
        return f"{evaluation.engine_label} picks it by itself"
    return resolution.knob.how(resolution.chosen) + '  (eval "$(fp4doctor env)")'


def document(report: Report) -> dict[str, Any]:
    """The JSON report: versioned, with every finding; every family alike under `families`."""
    from fp4doctor.doctor import Outcome
    from fp4doctor.selection.engine import engine_as_set, engine_auto

    findings = report.findings()
    host = report.facts
    engine = report.engine
    no_verdict = report.outcome is Outcome.NO_VERDICT
    return (
        {
            "schema_version": REPORT_SCHEMA_VERSION,
            "fp4doctor_version": __version__,
            "target": report.profile.target,
            "engine": {
                "package": report.profile.engine.package,
                "version": engine.version,
                "source": engine.source,
                "note": engine.note,
                "newest_known": report.profile.engine.newest_known,
                "verified": report.verified,
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
            "headline": headline(report),
            "env_makes_ready": report.env_makes_ready,
            "summary": summary_counts(findings),
            "families": {
                part.family: {
                    "title": part.title,
                    "era": str(part.evaluation.era.versions),
                    "ready": report.family_ready(part),
                    "chosen": part.chosen,
                    "backends": _backends_doc(part.evaluation, no_verdict),
                    "engine_auto": engine_auto(part.evaluation),
                    "engine_as_set": engine_as_set(part.evaluation),
                    "resolution": part.resolution.to_dict(),
                    "verified": part.evaluation.verified,
                    "unverified": [u.to_dict() for u in part.evaluation.unverified],
                    "cold_start": part.cold_start.to_dict() if part.cold_start else None,
                    "as_set": part.resolution.as_set.to_dict() if part.resolution.as_set else None,
                    "best": {
                        "backend": part.chosen,
                        "set_env": dict(part.resolution.set_env),
                        "unset_env": list(part.resolution.unset_env),
                        "cli_args": [list(a) for a in part.resolution.cli_args],
                    },
                    "counted": part in report.counted,
                }
                for part in report.families
            },
            "deployment": deployment_doc(report),
            "findings": [f.to_dict() for f in findings],
        }
        | ({"smoke_note": report.smoke_note} if report.smoke_note else {})
        | ({"model": report.model.to_dict()} if report.model else {})
    )


def deployment_doc(report: Report) -> dict[str, Any]:
    """The deployment as it will run: each field with its value (None: not established) and
    where it came from, the notes on settings the release cannot honour, the command judged."""
    deployment = report.families[0].evaluation.context.deployment
    fields = ("tp", "ep", "concurrency", "autotune", "cuda_graphs", "architectures", "experts")
    return {
        "fields": {
            f: {
                "value": list(v) if isinstance(v := getattr(deployment, f), tuple) else v,
                "origin": deployment.origin(f),
            }
            for f in fields
        },
        "notes": list(deployment.notes),
        "command": list(report.question.command),
    }


def _backends_doc(evaluation: Evaluation, no_verdict: bool) -> dict[str, Any]:
    """Each backend of one family: valid (null under no verdict), native, summary, problem."""
    return {
        name: {
            "valid": None if no_verdict else v.valid,
            "native": evaluation.profile.backends[name].native,
            "summary": evaluation.profile.backends[name].summary,
            "problem": NO_VERDICT_TEXT
            if no_verdict
            else (p.reason if (p := v.first_problem()) else None),
        }
        for name, v in evaluation.verdicts.items()
    }


def dumps(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def facts_text(host: facts.HostFacts) -> str:
    """`fp4doctor probe` for people: the facts that decide FP4 backends, one per line, in two
    columns that line up whatever the names' lengths."""
    rows: list[tuple[str, str]] = []  # (label, value); an empty label continues the row above
    nvml = host.nvml
    if host.gpus:
        rows.append(
            ("GPUs", f"driver {nvml.driver_version}, CUDA driver {nvml.cuda_driver_version}")
        )
        for g in host.gpus:
            mem = f", {g.memory_total_mib} MiB" if g.memory_total_mib else ""
            rows.append((f"  GPU {g.index}", f"{g.name}, compute capability {g.cc_text}{mem}"))
    else:
        rows.append(("GPUs", f"none ({nvml.status}: {nvml.error or 'no GPU listed'})"))
        if nvml.fix:
            rows.append(("", f"fix: {nvml.fix}"))
    if host.cuda_visible_devices is not None:
        rows.append(("CUDA_VISIBLE_DEVICES", repr(host.cuda_visible_devices)))
    p = host.packages
    rows += sorted(p.versions.items())
    if p.torch_cuda or p.versions.get("torch"):
        rows.append(("torch CUDA", p.torch_cuda or "none (CPU build)"))
    fe = host.cudnn.frontend
    rows.append(
        (
            "cuDNN (frontend loads)",
            f"{fe.version_text} from {fe.path}"
            if fe.version
            else f"none ({fe.error or 'not found'})",
        )
    )
    if host.cudnn.torch is not None:
        t = host.cudnn.torch
        rows.append(("cuDNN (torch)", f"{t.version_text or t.error} from {t.path}"))
    tc = host.toolchain
    rows.append(("nvcc", f"{tc.nvcc_version} at {tc.nvcc_path}" if tc.nvcc_path else "not found"))
    rows.append(("ninja", tc.ninja_path or "not found"))
    width = max(len(label) for label, _ in rows)
    lines = [f"fp4doctor {__version__} probe" + (f" · {host.hostname}" if host.hostname else "")]
    lines += [f"{label.ljust(width)}  {value}" for label, value in rows]
    for name, value in sorted(host.env.items()):
        lines.append(f"env {name}={value}")
    for name, reason in sorted(host.probe_errors.items()):
        lines.append(f"probe {name} failed: {reason}")
    return clean("\n".join(lines)) + "\n"


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
    return clean("\n".join(lines)) + "\n"


def model_lines(model: ModelVerdict, style: Style, verbose: bool) -> list[str]:
    """The --model section: the checkpoint, each layer class's GEMM on one rank, and what fails
    whatever the backend (a backend's own model findings show in its row)."""
    ckpt = model.checkpoint
    where = f"TP {model.tp}" + (f", EP {model.ep}" if model.ep > 1 else "")
    out = _Lines(style, verbose)
    out.gap()
    out.heading(f"Model  {ckpt.name} ({ckpt.architecture}) at {where}")
    out.text(f"{ckpt.quant.label}, from {ckpt.quant.file}")
    fp4 = [g for g in model.gemms if g.layer.fp4]
    width = max((len(g.layer.name) for g in fp4), default=5)
    for g in fp4:
        experts = f", {g.experts} experts/rank" if g.layer.experts else ""
        out.text(
            f"{g.layer.name.ljust(width)}  {g.layer.family:<6} {g.layer.scheme:<5} "
            f"N={g.n} K={g.k} per rank{experts}",
            2,
            width + 2,
        )
    skipped = sorted({g.layer.name for g in model.gemms if not g.layer.fp4})
    if skipped:
        out.text(f"not NVFP4 in this checkpoint: {', '.join(skipped)}")
    for f in model.findings:
        out.finding(f)
    return out.lines
