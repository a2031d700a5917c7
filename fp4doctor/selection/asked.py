"""The engine's answers beside the rules' prediction, as findings; where they disagree the
engine's answer decides.

Pure. Per FP4 GEMM family:
- `engine.oracle.FAMILY` (one per compute capability asked): what the engine's own code picks
  with the knobs as set, beside what the rules predicted. Agreement passes; a pick the rules
  did not predict is a warning that names both (the rules are stale there) and becomes the
  choice when fp4doctor left the choice to the engine; an exception, or a pick that cannot run
  here, fails (the host is not ready as set).
- `engine.oracle.FAMILY.knobs`: what the engine picks with the knobs `fp4doctor env` writes for
  the chosen backend. When it picks another kernel or refuses, the choice falls back to the
  best backend whose own knobs the engine honours, and says why.
- `engine.oracle.FAMILY` skip: "could not ask vLLM X: <reason>"; the rules' answer stands,
  unverified.
"""

from __future__ import annotations

from dataclasses import replace

from fp4doctor.findings import Finding, Kind, Status
from fp4doctor.oracle.answers import AS_SET, Answer, Case, EngineAnswers
from fp4doctor.rules import Evaluation
from fp4doctor.selection.choice import Resolution, resolve
from fp4doctor.selection.engine import engine_as_set

SOURCE = "the installed engine's own selection code, asked by fp4doctor/oracle (worker.py ADAPTERS)"


def fold(answers: EngineAnswers, evaluation: Evaluation, resolution: Resolution) -> Resolution:
    """`resolution` with the engine's answers for its family folded in (findings added; the
    choice changed where the engine's answer decides)."""
    family = evaluation.family
    fid = f"engine.oracle.{family}"
    label = answers.label
    if answers.unasked is not None:
        reason = f"could not ask {label}: {answers.unasked}; the rules' answer stands, unverified"
        skip = Finding(fid, Status.SKIP, reason, source=SOURCE, kind=Kind.ENGINE_PICK,
                       family=family)  # fmt: skip
        return _with(resolution, [skip])
    # The family's layers as the engine runs them: all weight-only (the model's fold says so,
    # and they were asked as such: cases_for every_weight_only), or W4A4.
    a16 = evaluation.weight_only and any(c.a16 for c in answers.cases if c.family == family)
    cases = [c for c in answers.cases if c.family == family and c.a16 == a16]
    if not cases:
        return resolution
    expected = engine_as_set(evaluation)
    found: list[Finding] = []
    engine_picks: set[str | None] = set()
    unknown = False  # a kernel the rules do not know: theirs to judge, not fp4doctor's
    for case in (c for c in cases if c.label == AS_SET):
        answer = answers.answer(case)
        if answer is None:
            continue
        unknown |= answer.raised is None and answer.backend is None
        engine_picks.add(answer.backend if answer.raised is None else None)
        found.append(_as_set(fid, label, evaluation, case, answer, expected))
    if not a16:
        found += _weight_only(answers, evaluation, resolution, fid, label)
    resolution = _as_asked(resolution, engine_picks, evaluation, label)
    chosen = resolution.chosen
    # fp4doctor left the choice to the engine: the engine's own pick is what runs.
    left_to_engine = resolution.knob is None and chosen is not None
    if left_to_engine and unknown:  # not steered away from a kernel nobody judged
        note = f"{label} picks a kernel fp4doctor's rules do not know: not judged here"
        return _with(replace(resolution, notes=(*resolution.notes, note)), found)
    if left_to_engine and engine_picks and engine_picks != {chosen}:
        picks = [p for p in engine_picks if p is not None]
        if None not in engine_picks and len(picks) == 1 and evaluation.valid(picks[0]):
            note = f"{label} picks {picks[0]} by itself here (its own code, asked): nothing to set"
            return _with(_rechosen(resolution, picks[0], label, note), found)
        return _fall_back(answers, evaluation, resolution, found, "as set", a16)
    if resolution.knob is None or chosen is None:
        return _with(resolution, found)
    knob_cases = [c for c in cases if c.label == chosen]
    wrong = [
        (c, a) for c in knob_cases if (a := answers.answer(c)) is not None and not _honours(c, a)
    ]
    for case, answer in ((c, answers.answer(c)) for c in knob_cases):
        if answer is None:
            continue
        ok = (case, answer) not in wrong
        found.append(
            Finding(
                f"{fid}.knobs",
                Status.PASS if ok else Status.FAIL,
                f"with {case.knobs_text()} on compute capability {_cc(case)}, {label} "
                f"{answer.text()}" + ("" if ok else f", not {chosen}"),
                backend=chosen,
                source=SOURCE,
                details=_details(case, answer, chosen),
                kind=Kind.CHOICE,
                family=family,
            )
        )
    if wrong:
        return _fall_back(answers, evaluation, resolution, found, chosen, a16)
    return _with(resolution, found)


def _weight_only(
    answers: EngineAnswers, evaluation: Evaluation, resolution: Resolution, fid: str, label: str
) -> list[Finding]:
    """The model's weight-only (W4A16) linear layer class: what the engine's own W4A16
    selection picks, beside fp4doctor's choice for the family."""
    out = []
    for case in (c for c in answers.cases if c.family == evaluation.family and c.a16):
        answer = answers.answer(case)
        if answer is None:
            continue
        same = answer.raised is None and answer.backend == resolution.chosen
        out.append(
            Finding(
                f"{fid}.w4a16",
                Status.PASS if same else Status.WARN,
                f"{label}'s own selection code, for the model's weight-only (W4A16) linear "
                f"layers on compute capability {_cc(case)}, {answer.text()}"
                + ("" if same else f"; fp4doctor chooses {resolution.chosen} for the family"),
                backend=answer.backend,
                source=SOURCE,
                details=_details(case, answer, resolution.chosen),
                kind=Kind.MODEL,
                family=evaluation.family,
            )
        )
    return out


def _honours(case: Case, answer: Answer) -> bool:
    return answer.raised is None and answer.backend == case.label


def _cc(case: Case) -> str:
    return f"{case.cc[0]}.{case.cc[1]}"


def _details(case: Case, answer: Answer, predicted: str | None) -> dict[str, object]:
    return {
        "compute_capability": _cc(case),
        "knobs": case.knobs_text(),
        "predicted": predicted,
        "engine": answer.to_dict(),
    }


def _as_set(
    fid: str, label: str, evaluation: Evaluation, case: Case, answer: Answer, predicted: str | None
) -> Finding:
    where = f"on compute capability {_cc(case)} with {case.knobs_text()}"
    details = _details(case, answer, predicted)
    rules = f"the rules predicted {predicted or 'no backend'}"
    if answer.raised is not None:
        return Finding(
            fid,
            Status.FAIL,
            f"{label}'s own selection code, {where}, {answer.text()} ({rules})",
            fix='eval "$(fp4doctor env)"',
            source=SOURCE,
            details=details,
            kind=Kind.ENGINE_PICK,
            family=evaluation.family,
        )
    if answer.backend == predicted:
        reason = f"{label}'s own selection code {answer.text()} {where}, as the rules predict"
        return Finding(
            fid,
            Status.PASS,
            reason,
            backend=predicted,
            source=SOURCE,
            details=details,
            kind=Kind.ENGINE_PICK,
            family=evaluation.family,
        )
    if answer.backend is None:  # a kernel the profile does not know (nothing judged it)
        return Finding(
            fid,
            Status.WARN,
            f"{label}'s own selection code {answer.text()} {where}; {rules}: whether it runs "
            "here is not judged",
            source=SOURCE,
            details=details,
            kind=Kind.ENGINE_PICK,
            family=evaluation.family,
        )
    runs = evaluation.valid(answer.backend)
    verdict = (
        "the engine's answer decides; the rules are stale here"
        if runs
        else "and that kernel cannot run here"
        + (
            f": {_why_not(evaluation, answer.backend)}"
            if answer.backend in evaluation.verdicts
            else ""
        )
    )
    return Finding(
        fid,
        Status.WARN if runs else Status.FAIL,
        f"{label}'s own selection code {answer.text()} {where}; {rules}: {verdict}",
        fix=None if runs else 'eval "$(fp4doctor env)"',
        backend=answer.backend,
        source=SOURCE,
        details=details,
        kind=Kind.ENGINE_PICK,
        family=evaluation.family,
    )


def _why_not(evaluation: Evaluation, backend: str | None) -> str:
    problems = evaluation.verdicts[backend].problems() if backend else []
    return "; ".join(dict.fromkeys(p.reason for p in problems[:2])) or "the rules reject it"


def _fall_back(
    answers: EngineAnswers,
    evaluation: Evaluation,
    resolution: Resolution,
    found: list[Finding],
    reason: str,
    a16: bool = False,
) -> Resolution:
    """The best backend whose own knobs make the engine pick it on every compute capability
    asked (the rules' order: the engine's automatic order, then the profile's), resolved as
    `fp4doctor env --prefer` would; the resolution as it was when there is none."""
    family = evaluation.family
    by_label: dict[str, list[Answer | None]] = {}
    for case in answers.cases:
        if case.family == family and case.label != AS_SET and case.a16 == a16:
            answer = answers.answer(case)
            by_label.setdefault(case.label, []).append(
                answer if answer is not None and _honours(case, answer) else None
            )
    honoured = [b for b, got in by_label.items() if got and None not in got]
    order = [*evaluation.auto_order, *evaluation.profile.backends]
    best = next((b for b in order if b in honoured and evaluation.valid(b)), None)
    what = "the knobs as set" if reason == AS_SET else f"the knobs for {reason}"
    if best is None:
        note = f"{answers.label} honours none of fp4doctor's knob sets with {what} failing"
        return _with(replace(resolution, notes=(*resolution.notes, note)), found)
    fallback = resolve(evaluation, prefer=best)
    # The knob sets it did not honour are steered around now: said, not blocking.
    found = [
        replace(f, status=Status.WARN) if f.kind is Kind.CHOICE and f.status.blocking else f
        for f in found
    ]
    note = (
        f"{answers.label}'s own code does not pick {resolution.chosen} with {what}: "
        f"using {best}, whose knobs it honours (asked)"
    )
    return _with(replace(fallback, notes=(*fallback.notes, note)), found)


def _rechosen(resolution: Resolution, backend: str, label: str, note: str) -> Resolution:
    """The choice moved to the engine's own pick, its choice finding with it (the headline,
    the JSON and JUnit read the same backend)."""
    findings = tuple(
        replace(f, reason=f"use {backend}", backend=backend)
        if f.kind is Kind.CHOICE and f.status is Status.PASS
        else f
        for f in resolution.findings
    )
    return replace(resolution, chosen=backend, notes=(note,), findings=findings)


def _as_asked(
    resolution: Resolution, picks: set[str | None], evaluation: Evaluation, label: str
) -> Resolution:
    """What runs as set, from the engine's own answer where nothing set selects a backend: one
    known kernel on every compute capability asked, or none (it raised)."""
    as_set = resolution.as_set
    if as_set is None or not as_set.engine_pick or len(picks) != 1:
        return resolution
    (backend,) = picks
    by = f"{label}'s own code, asked"
    if backend is None:
        return replace(resolution, as_set=replace(as_set, backend=None, by=by, runs=False,
                                                  reason="the engine raised"))  # fmt: skip
    if backend not in evaluation.verdicts:
        return resolution  # a kernel the rules do not know: not judged
    runs = evaluation.valid(backend)
    reason = "" if runs else _why_not(evaluation, backend)
    return replace(resolution, as_set=replace(as_set, backend=backend, by=by, runs=runs,
                                              reason=reason))  # fmt: skip


def _with(resolution: Resolution, findings: list[Finding]) -> Resolution:
    return replace(resolution, findings=(*resolution.findings, *findings))
