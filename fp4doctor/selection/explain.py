"""`fp4doctor explain`: per layer class of the model, the kernel this engine release picks and
why each earlier candidate was skipped; and the backend fp4doctor would switch on instead.

Built from the report alone (pure): the engine's pick for each layer class (selection/engine.py,
which `check` reads too: the automatic order of the layer's family, or the release's weight-only
branch for a W4A16 layer; the backends' verdicts with host rules, known bugs and the model's own
per-rank shape findings), and the resolution. The engine chooses once for all layers
of a family and does not look at shapes, so a kernel it picks can still fail on one layer: that
is what the explanation says, layer by layer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fp4doctor.checkpoint.layers import FAMILY_LINEAR
from fp4doctor.checkpoint.parallel import RankGemm
from fp4doctor.selection.engine import Candidate, Pick, Status, layer_picks

if TYPE_CHECKING:
    from fp4doctor.doctor import FamilyPart, Report


@dataclass(frozen=True)
class LayerExplanation:
    gemm: RankGemm
    steps: tuple[Candidate, ...]
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
    picks = {
        g.layer.name: found
        for part in report.families
        for g, found in layer_picks(part.evaluation, model)
    }
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
        out.append(_layer(g, part, picks[g.layer.name]))
    return out


def _layer(g: RankGemm, part: FamilyPart, found: Pick) -> LayerExplanation:
    evaluation, resolution = part.evaluation, part.resolution
    label = evaluation.engine_label
    chosen = resolution.chosen
    if chosen is None:
        how = "no backend is valid here for every layer of this family"
    elif resolution.knob is None:
        how = f"{label} picks it by itself"
    else:
        how = resolution.knob.how(chosen)
    note = None
    if found.weight_only and not found.known:
        note = f"which kernel {label} runs weight-only (W4A16) layers on is not known to fp4doctor"
    elif found.weight_only and g.layer.family == FAMILY_LINEAR:
        note = (
            f"{label} routes weight-only (W4A16) layers to its weight-only kernels "
            f"({', '.join(found.kernels)}), whatever its W4A4 pick"
        )
    elif found.weight_only:
        note = (
            f"{label}'s automatic order passes over the backends that do not run weight-only "
            f"(W4A16) experts; those that do: {', '.join(found.kernels)}"
        )
    elif chosen is not None and chosen != found.backend:
        note = f"fp4doctor switches the {g.layer.family} family to {chosen}: {how}"
    return LayerExplanation(g, found.candidates, found.backend, chosen, how, note)


def text(report: Report, explanations: list[LayerExplanation]) -> str:
    """The explanation for people (plain text; the caller escapes and fits it)."""
    model = report.model
    assert model is not None
    ckpt = model.checkpoint
    where = f"TP {model.tp}" + (f", EP {model.ep}" if model.ep > 1 else "")
    lines = [
        f"{report.engine_label} · {ckpt.name} ({ckpt.architecture}, {ckpt.quant.label}) at {where}"
    ]
    marks = {Status.SKIPPED: "skipped", Status.PICKED: "picked ", Status.FAILS: "FAILS  "}
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
