"""Selection: per FP4 GEMM family, what the engine runs and what fp4doctor chooses.

    engine.py   the engine's walk: what it picks by itself, for the family and for each layer
                class of a model (predicted from the rules; `as_set` with the knobs as set)
    choice.py   fp4doctor's choice (`best`) and what runs as set (`AsSet`), with the knob that
                selects it: `resolve`, `meant_for`
    asked.py    the installed engine's own answers folded in: where they disagree, they decide
    model.py    what the engine does with a model's layers (its pick failing on a layer's shape)
    explain.py  per layer class, the kernel the engine picks and why each earlier one is skipped

`select` is the one entry point the doctor calls, once per family: the model folded in, the
engine's pick for its layers, the choice, then the engine's own answers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from fp4doctor.findings import Finding
from fp4doctor.selection.choice import Resolution, resolve

if TYPE_CHECKING:
    from fp4doctor.checkpoint.judge import ModelVerdict
    from fp4doctor.oracle.answers import EngineAnswers
    from fp4doctor.rules import Evaluation


@dataclass(frozen=True)
class Selected:
    """One family selected: the evaluation as the model folds it, the resolution (as set and
    best), and the model findings the engine's pick for its layers adds."""

    evaluation: Evaluation
    resolution: Resolution
    model_findings: tuple[Finding, ...] = ()


def select(
    evaluation: Evaluation,
    *,
    prefer: str | None,
    require: str | None,
    model: ModelVerdict | None = None,
    answers: EngineAnswers | None = None,
) -> Selected:
    """Select one family: fold the model in (backends that cannot run its GEMMs, the layers'
    scheme), judge the engine's pick for each layer class, resolve, fold the engine's answers.
    A bad --prefer/--require is a ResolveError (a ValueError naming the valid names)."""
    from fp4doctor.selection.model import model_pick

    found: tuple[Finding, ...] = ()
    if model is not None:
        evaluation = model.fold(evaluation)
        picked = model_pick(model, evaluation)
        found = (picked,) if picked is not None else ()
    resolution = resolve(evaluation, prefer=prefer, require=require)
    if answers is not None:  # the engine's own answer beside the rules'; it decides
        from fp4doctor.selection.asked import fold

        resolution = fold(answers, evaluation, resolution)
    return Selected(evaluation, resolution, found)
