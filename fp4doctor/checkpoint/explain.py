"""`fp4doctor explain`: per layer class of the model, the kernel this engine release picks and
why each earlier candidate was skipped; and the backend fp4doctor would switch on instead.

Built from the report alone (pure): the engine's automatic order for the layer's family (the
profile's era, `auto`), the backends' verdicts (host rules, known bugs, and the model's own
per-rank shape findings folded in), and the resolution. The engine chooses once for all layers
of a family and does not look at shapes, so a kernel it picks can still fail on one layer: that
is what the explanation says, layer by layer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fp4doctor.checkpoint.layers import SCHEME_W4A16
from fp4doctor.checkpoint.parallel import RankGemm
from fp4doctor.findings import Kind

if TYPE_CHECKING:
    from fp4doctor.checkpoint.judge import ModelVerdict
    from fp4doctor.doctor import FamilyPart, Report

SKIPPED = "skipped"
PICKED = "picked"
FAILS = "picked, fails"


@dataclass(frozen=True)
class Step:
    backend: str
    status: str  # SKIPPED | PICKED | FAILS
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"backend": self.backend, "status": self.status, "reason": self.reason}


@dataclass(frozen=True)
class LayerExplanation:
    gemm: RankGemm
    steps: tuple[Step, ...]
    engine_pick: str | None  # what the engine, left alone, runs this layer on
    choice: str | None  # what fp4doctor would switch on for the layer's family
    choice_how: str  # the knob, or why none is needed
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.gemm.to_dict(),
            "candidates": [s.to_dict() for s in self.steps],
            "engine_pick": self.engine_pick,
            "choice": self.choice,
            "choice_how": self.choice_how,
            "note": self.note,
        }


def explain(report: Report) -> list[LayerExplanation]:
    """One explanation per NVFP4 layer class of the report's model."""
    model = report.model
    if model is None:
        return []
    parts = {p.family: p for p in report.families}
    out = []
    for g in model.gemms:
        if not g.layer.fp4:
            continue
        part = parts.get(g.layer.family)
        if part is None:
            label = report.engine_label
            notes = [f.reason for f in model.findings if f.details.get("layer") == g.layer.name]
            out.append(
                LayerExplanation(
                    g, (), None, None, "",
                    note=f"the {report.profile.title} profile does not model the "
                    f"{g.layer.family} family of {label}; fp4doctor cannot say which kernel runs it"
                    + ("; " + "; ".join(notes) if notes else ""),
                )
            )  # fmt: skip
            continue
        out.append(_layer(g, part, model))
    return out


def _layer(g: RankGemm, part: FamilyPart, model: ModelVerdict) -> LayerExplanation:
    from fp4doctor.checkpoint import constraints

    evaluation, resolution = part.evaluation, part.resolution
    label = evaluation.engine_label
    name = g.layer.name
    candidates = [s.backend for s in evaluation.era.auto]
    weight_only = None
    if g.layer.scheme == SCHEME_W4A16:
        weight_only = constraints.load().weight_only_backends(
            evaluation.profile.target, evaluation.engine.version
        )
        if weight_only is not None:
            candidates = [b for b in weight_only.backends if b in evaluation.verdicts]
    steps: list[Step] = []
    pick: str | None = None
    kind = f"of {label}'s weight-only kernels" if weight_only else f"in {label}'s automatic order"
    for b in dict.fromkeys(candidates):
        verdict = evaluation.verdicts.get(b)
        if verdict is None:
            continue
        host = [p for p in verdict.problems() if p.kind is not Kind.MODEL]
        own = [f for f in model.backend_findings(b, name) if f.status.blocking]
        own += [f for f in model.backend_findings(b, "linear") if f.status.blocking]
        if weight_only is None and b not in evaluation.auto_order:
            skip = model.engine_skips(b)  # the engine passes over it for this model
            why = (
                host[0].reason
                if host
                else skip.reason
                if skip
                else "its condition in the automatic order does not hold"
            )
            steps.append(Step(b, SKIPPED, why))
            continue
        if weight_only is not None and host:
            steps.append(Step(b, SKIPPED, host[0].reason))
            continue
        pick = b
        if own:
            steps.append(
                Step(b, FAILS, f"{label} picks it, and it fails on this layer: {own[0].reason}")
            )
        elif host:
            steps.append(
                Step(b, FAILS, f"{label} picks it, but it cannot run here: {host[0].reason}")
            )
        else:
            steps.append(Step(b, PICKED, f"the first {kind} that runs here"))
        break
    chosen = resolution.chosen
    if chosen is None:
        how = "no backend is valid here for every layer of this family"
    elif resolution.knob is None:
        how = f"{label} picks it by itself"
    else:
        how = resolution.knob.how(chosen)
    note = None
    if weight_only is not None:
        note = f"weight-only (W4A16) layers run on {', '.join(weight_only.backends)} in {label}"
    elif chosen is not None and chosen != pick:
        note = f"fp4doctor switches the {g.layer.family} family to {chosen}: {how}"
    return LayerExplanation(g, tuple(steps), pick, chosen, how, note)


def text(report: Report, explanations: list[LayerExplanation]) -> str:
    """The explanation for people (plain text; the caller escapes and fits it)."""
    model = report.model
    assert model is not None
    ckpt = model.checkpoint
    where = f"TP {model.tp}" + (f", EP {model.ep}" if model.ep > 1 else "")
    lines = [
        f"{report.engine_label} · {ckpt.name} ({ckpt.architecture}, {ckpt.quant.label}) at {where}"
    ]
    marks = {SKIPPED: "skipped", PICKED: "picked ", FAILS: "FAILS  "}
    for e in explanations:
        g = e.gemm
        experts = f", {g.experts} experts/rank" if g.layer.experts else ""
        lines += [
            "",
            f"{g.layer.name}  {g.layer.family} {g.layer.scheme}  N={g.n} K={g.k} per rank{experts}",
        ]
        width = max((len(s.backend) for s in e.steps), default=0)
        for i, s in enumerate(e.steps, 1):
            lines.append(f"  {i}. {s.backend.ljust(width)}  {marks[s.status]}  {s.reason}")
        if e.choice is not None or e.steps:
            lines.append(f"  → fp4doctor env: {e.choice or 'none'} ({e.choice_how})")
        if e.note:
            lines.append(f"  note: {e.note}")
    return "\n".join(lines) + "\n"


def document(report: Report, explanations: list[LayerExplanation]) -> dict[str, Any]:
    model = report.model
    assert model is not None
    return {
        "engine": report.engine_label,
        "target": report.profile.target,
        "model": model.checkpoint.to_dict(),
        "tp": model.tp,
        "ep": model.ep,
        "layers": [e.to_dict() for e in explanations],
    }
