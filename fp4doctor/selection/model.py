"""What the engine does with a model's layers, left alone (no knob set): its pick for a layer
class failing on that layer's per-rank GEMM, or no backend left for it. The checkpoint is read
by fp4doctor/checkpoint (shapes, formats, content); what the engine picks is decided here."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fp4doctor.findings import Finding, Kind, Status
from fp4doctor.selection.engine import Pick, layer_picks
from fp4doctor.selection.engine import Status as Taken

if TYPE_CHECKING:
    from fp4doctor.checkpoint.judge import ModelVerdict
    from fp4doctor.rules import Evaluation


def model_pick(model: ModelVerdict, evaluation: Evaluation) -> Finding | None:
    """A failure when the engine, left alone (no knob set), cannot run the model's layers
    of this family (`evaluation`, folded): its pick for a layer class fails on that layer's
    per-rank GEMM, or it passes over every backend. A pick that cannot run on the host at
    all is the resolver's warning, unless the layer takes another branch than the family
    (a weight-only layer in a mixed checkpoint)."""
    if evaluation.env_selection is not None:
        return None
    for _, pick in layer_picks(evaluation, model):
        chosen = pick.chosen
        if chosen is None and pick.fails:
            return _none_left(evaluation, pick)
        if chosen is None or chosen.status is not Taken.FAILS:
            continue
        finding = chosen.finding
        own = finding is not None and finding in model.per_backend.get(chosen.backend, ())
        if finding is not None and (own or pick.weight_only != evaluation.weight_only):
            return _pick_fails(evaluation, pick, finding)
    return None


def _none_left(evaluation: Evaluation, pick: Pick) -> Finding:
    passed = pick.passed_over
    first = next((c.finding for c in passed if c.finding is not None), None)
    names = ", ".join(c.backend for c in passed)
    reason = passed[0].reason if passed else ""
    return Finding(
        f"model.engine_auto.{evaluation.family}",
        Status.FAIL,
        f"{evaluation.engine_label}, left alone, finds no {evaluation.family} backend for "
        f"this model ('No NvFp4 MoE backend supports the deployment configuration'): it "
        f"passes over {names}; {reason}",
        fix='eval "$(fp4doctor env)" (a backend that runs it, if one does here), or '
        + ((first.fix if first else None) or "another engine release"),
        backend=passed[0].backend if passed else None,
        source=first.source if first else None,
        details=dict(first.details) if first else {},
        kind=Kind.ENGINE_PICK,
    )


def _pick_fails(evaluation: Evaluation, pick: Pick, blocking: Finding) -> Finding:
    passed = [c for c in pick.passed_over if c.finding is not None and c.finding.details]
    skipped = ""
    if passed:
        why = "; ".join(
            f"{c.backend}: {c.finding.details.get('why', c.finding.id)}"
            for c in passed
            if c.finding is not None
        )
        skipped = f"passes over {', '.join(c.backend for c in passed)} ({why}) and "
    layers = f" for its weight-only {pick.layer} layers" if pick.weight_only else ""
    return Finding(
        f"model.engine_auto.{evaluation.family}",
        Status.FAIL,
        f"{evaluation.engine_label}, left alone, {skipped}picks {pick.backend}{layers}, which "
        f"cannot run this model: {blocking.reason}",
        fix='eval "$(fp4doctor env)", or ' + (blocking.fix or "another --tp"),
        backend=pick.backend,
        source=blocking.source,
        details=dict(blocking.details),
        kind=Kind.ENGINE_PICK,
    )
