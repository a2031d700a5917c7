"""The checkpoint's content, judged for one engine release: each defect (fp4doctor/checkpoint/
content.py) becomes a finding with what this release does with it (profiles/shapes.yaml
`content`) and the fix, and the layer class the release runs the NVFP4 layers as.

Pure. Ids are `model.content.<kind>.<layer class>.<tensor>` (`model.content.missing.
experts.gate_up.input_scale`), `model.content.weight_only_groups.<family>`; `--ignore
model.content` names them all. A defect the release turns into a load error or garbage fails
(NOT READY, exit 1); one it runs with a picked or default value warns; one whose effect in this
release was not read warns, saying so.
"""

from __future__ import annotations

from collections.abc import Sequence

from fp4doctor.checkpoint import Checkpoint
from fp4doctor.checkpoint.content import (
    DTYPE,
    GATE_UP,
    MISSING,
    MODULE,
    NONFINITE,
    NOT_READ,
    TRUNCATED,
    ZERO,
    Defect,
)
from fp4doctor.checkpoint.content_rules import WEIGHT_ONLY_GROUPS, ContentRule, pick
from fp4doctor.checkpoint.layers import SCHEME_NONE, SCHEME_W4A4
from fp4doctor.checkpoint.quant import MODELOPT_NVFP4
from fp4doctor.findings import Finding, Kind, Status

_WHAT = {
    MISSING: "not in the checkpoint",
    ZERO: "0",
    NONFINITE: "not finite (inf or NaN)",
    GATE_UP: "different for gate (w1) and up (w3)",
    DTYPE: "not stored as the declared format stores it",
    TRUNCATED: "past the end of its file",
}


def findings(
    ckpt: Checkpoint, target: str, version: str, label: str, rules: Sequence[ContentRule]
) -> list[Finding]:
    """The content's findings for `target` at `version` (`label`: "vLLM 0.33.0")."""
    out = [_finding(d, ckpt, target, version, label, rules) for d in ckpt.content.defects]
    out += _weight_only_groups(ckpt, target, version, label, rules)
    return [f for f in out if f is not None]


def engine_scheme(
    ckpt: Checkpoint, target: str, version: str, family: str, rules: Sequence[ContentRule]
) -> str | None:
    """The layer class (W4A4, W4A16) `target` at `version` runs the checkpoint's NVFP4 layers of
    `family` as, where the headers alone do not say it: a ModelOpt `quant_algo: NVFP4` checkpoint
    is W4A4 to the engine whether or not its modules store input scales, unless the release reads
    weight-only config groups as W4A16 (content rules `weight_only_groups`). None: as stored."""
    if ckpt.quant.format != MODELOPT_NVFP4:
        return None
    if ckpt.quant.weight_only_groups:
        rule = pick(rules, target, version, WEIGHT_ONLY_GROUPS, (), family, ckpt.quant.format)
        return rule.scheme if rule is not None else None
    return SCHEME_W4A4


def _finding(
    d: Defect,
    ckpt: Checkpoint,
    target: str,
    version: str,
    label: str,
    rules: Sequence[ContentRule],
) -> Finding | None:
    where = d.layer or "checkpoint"
    tensor = d.tensors[0] if d.tensors else "headers"
    fid = f"model.content.{d.kind}.{where}.{tensor}"
    details = {k: v for k, v in d.to_dict().items() if v or k == "count"}
    if d.kind == NOT_READ:
        return Finding(
            f"model.content.{NOT_READ}",
            Status.WARN,
            f"{d.count} shard header(s) not read for the content check ({d.detail}; first: "
            f"{', '.join(d.examples)}): their tensors' presence is judged from the index only, "
            "their dtypes and scales not at all",
            details=details,
            kind=Kind.MODEL,
        )
    rule = pick(rules, target, version, d.kind, d.tensors, d.family, ckpt.quant.format)
    said = _said(d)
    if rule is None:
        return Finding(
            fid,
            Status.WARN,
            f"{said}: what {label} does with it was not judged (fp4doctor has not read it)",
            details=details,
            kind=Kind.MODEL,
            family=d.family or None,
        )
    if rule.effect == "reads":
        return None
    return Finding(
        fid,
        Status.FAIL if rule.blocking else Status.WARN,
        f"{said}: {label} {rule.says}",
        fix=rule.fix,
        source=rule.cited,
        details={**details, "effect": rule.effect, "rule": rule.id},
        kind=Kind.MODEL,
        family=d.family or None,
        rule=rule.id,
    )


def _said(d: Defect) -> str:
    """The defect in words: which tensor, how many, where, what was found."""
    tensor = "/".join(d.tensors) or "tensor"
    if d.tensors == (MODULE,):
        tensor = "module(s), weight and scales,"
    experts = f" ({d.experts} expert(s))" if d.experts else ""
    where = f"{d.layer}: " if d.layer else ""
    shown = f" ({d.detail})" if d.detail else ""
    first = f"; first: {d.examples[0]}" if d.examples else ""
    if d.kind == DTYPE and not d.layer:
        return f"the checkpoint's weights are not NVFP4{shown}"
    return f"{where}{d.count} {tensor}{experts} {_WHAT.get(d.kind, d.kind)}{shown}{first}"


def _weight_only_groups(
    ckpt: Checkpoint, target: str, version: str, label: str, rules: Sequence[ContentRule]
) -> list[Finding | None]:
    """Class 4: `quant_algo: NVFP4` whose config groups quantise weights only."""
    if not ckpt.quant.weight_only_groups:
        return []
    out: list[Finding | None] = []
    said = (
        f"{ckpt.quant.file} says quant_algo NVFP4 (W4A4), but every config group's "
        "input_activations is null (weights only)"
    )
    for family in sorted({c.family for c in ckpt.layers if c.scheme != SCHEME_NONE}):
        rule = pick(rules, target, version, WEIGHT_ONLY_GROUPS, (), family, ckpt.quant.format)
        fid = f"model.content.{WEIGHT_ONLY_GROUPS}.{family}"
        details = {"family": family}
        if rule is None:
            out.append(Finding(
                fid, Status.WARN,
                f"{said}: how {label} loads its {family} layers was not judged (fp4doctor has "
                "not read it)",
                details=details, kind=Kind.MODEL, family=family,
            ))  # fmt: skip
            continue
        if rule.effect == "reads":
            continue
        out.append(
            Finding(
                fid,
                Status.FAIL if rule.blocking else Status.WARN,
                f"{said}: {label} {rule.says} ({family} layers run as {rule.scheme})",
                fix=rule.fix,
                source=rule.cited,
                details={
                    **details,
                    "scheme": rule.scheme,
                    "effect": rule.effect,
                    "rule": rule.id,
                },
                kind=Kind.MODEL,
                family=family,
                rule=rule.id,
            )
        )
    return out
