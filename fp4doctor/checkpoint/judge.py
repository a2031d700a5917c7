"""The model's findings: what this engine release does with each rank's GEMMs.

Pure: a checkpoint, a profile, an engine version and a parallel size in; findings out. Two kinds:
- per backend (`per_backend`): a backend that cannot run one of the model's per-rank GEMMs (an
  unaligned N, K or MoE intermediate size it neither pads nor accepts; W4A4-only kernels for a
  weight-only checkpoint). The core folds them into that backend's verdict, so the choice steers
  to a backend that can run the model;
- standing (`findings`): what fails whatever the backend (a format this release does not read,
  a size TP does not divide, an alignment every backend of the release needs).
Ids are `model.<layer class>.<...>`, so `--ignore model.experts` names all the MoE's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from fp4doctor.checkpoint import Checkpoint
from fp4doctor.checkpoint.constraints import Alignment, ShapeRules
from fp4doctor.checkpoint.layers import FAMILY_LINEAR, SCHEME_W4A16
from fp4doctor.checkpoint.parallel import RankGemm, per_rank
from fp4doctor.findings import Finding, Status, apply_ignores
from fp4doctor.profile.model import Profile
from fp4doctor.rules import Evaluation
from fp4doctor.versions import contains

TP_SIZES = (1, 2, 4, 8, 16)


@dataclass(frozen=True)
class ModelVerdict:
    """What the model means on this engine release at this parallel size."""

    checkpoint: Checkpoint
    tp: int
    ep: int
    gemms: tuple[RankGemm, ...]
    findings: tuple[Finding, ...] = ()  # standing: they fail whatever backend is chosen
    per_backend: Mapping[str, tuple[Finding, ...]] = field(default_factory=dict)

    def backend_findings(self, backend: str, layer: str | None = None) -> tuple[Finding, ...]:
        found = self.per_backend.get(backend, ())
        if layer is None:
            return found
        return tuple(f for f in found if f.details.get("layer") == layer)

    def fold(self, evaluation: Evaluation) -> Evaluation:
        """`evaluation` with each backend's model findings in its verdict: a backend that cannot
        run the model's GEMMs is not valid here, and the choice moves on."""
        verdicts = {
            name: replace(v, findings=(*v.findings, *own))
            if (own := self.per_backend.get(name))
            else v
            for name, v in evaluation.verdicts.items()
        }
        return replace(evaluation, verdicts=verdicts)

    def engine_pick(self, evaluation: Evaluation) -> Finding | None:
        """A failure when the engine, left alone (no knob set), picks a backend that cannot run
        the model's GEMMs: it stops at model load (or worse), whatever fp4doctor would choose."""
        auto = evaluation.engine_auto
        if auto is None or evaluation.env_selection is not None:
            return None
        # Not the W4A4-only kernels' refusal of a weight-only checkpoint: the engine routes
        # weight-only layers to its weight-only kernels by itself, whatever its W4A4 pick.
        blocking = [
            f
            for f in self.per_backend.get(auto, ())
            if f.status.blocking and not f.id.endswith(".scheme")
        ]
        if not blocking:
            return None
        return Finding(
            f"model.engine_auto.{evaluation.family}",
            Status.FAIL,
            f"{evaluation.engine_label}, left alone, picks {auto}, which cannot run this model: "
            f"{blocking[0].reason}",
            fix='eval "$(fp4doctor env)", or ' + (blocking[0].fix or "another --tp"),
            backend=auto,
            source=blocking[0].source,
            details=dict(blocking[0].details),
        )

    def with_findings(self, *found: Finding) -> ModelVerdict:
        return replace(self, findings=(*self.findings, *found))

    def with_ignores(self, patterns: Iterable[str]) -> ModelVerdict:
        pats = list(patterns)
        return replace(
            self,
            findings=tuple(apply_ignores(self.findings, pats)),
            per_backend={b: tuple(apply_ignores(fs, pats)) for b, fs in self.per_backend.items()},
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "checkpoint": self.checkpoint.to_dict(),
            "tp": self.tp,
            "ep": self.ep,
            "gemms": [g.to_dict() for g in self.gemms],
            "findings": [f.to_dict() for f in self.findings],
            "backends": {b: [f.to_dict() for f in fs] for b, fs in self.per_backend.items() if fs},
        }


def judge(
    ckpt: Checkpoint, profile: Profile, version: str, rules: ShapeRules, tp: int = 1, ep: int = 1
) -> ModelVerdict:
    """The model's findings for `profile`'s engine at `version`, at TP `tp` and EP `ep`."""
    target = profile.target
    label = f"{profile.title} {version}"
    gemms = ckpt.gemms(tp, ep)
    fp4 = [g for g in gemms if g.layer.fp4]
    fmt = ckpt.quant.format
    standing: list[Finding] = []
    per_backend: dict[str, list[Finding]] = {}
    where = f"TP {tp}" + (f", EP {ep}" if ep > 1 else "")

    for family in sorted({g.layer.family for g in fp4}):
        row = rules.supported(target, version, fmt, family)
        if row is not None:
            standing.append(
                Finding(
                    f"model.format.{family}",
                    Status.FAIL,
                    f"{label} does not read {ckpt.quant.label} checkpoints for its {family} "
                    f"layers (releases {row.engine} do)",
                    fix=f"pip install -U '{profile.engine.package}{row.engine}'",
                    source=row.source,
                )
            )

    for g in fp4:
        name = g.layer.name
        if g.problem:
            fits = _tp_sizes(ckpt, g, lambda other: other.problem is None)
            standing.append(
                Finding(
                    f"model.{name}.split",
                    Status.FAIL,
                    f"{name} at {where}: {g.problem}, so the engine cannot shard it",
                    fix=_tp_fix(fits),
                    details={"layer": name},
                )
            )
            continue
        for rule in rules.alignments:
            if not rule.applies(target, version, g.layer.family, fmt):
                continue
            for dim in rule.dims:
                value = _value(g, dim)
                if value is None or rule.holds(value):
                    continue
                finding = _misaligned(
                    ckpt, g, rule, dim, value, where, label, profile, rules, version
                )
                backends = rule.backends or ()
                if not backends:
                    standing.append(finding)
                for b in backends:
                    if b in profile.backends:
                        per_backend.setdefault(b, []).append(
                            replace(finding, id=f"model.{name}.{b}.{dim}{rule.multiple}", backend=b)
                        )
                    else:
                        # A backend of a family this profile does not model: a warning.
                        standing.append(replace(
                            finding,
                            id=f"model.{name}.{b}.{dim}{rule.multiple}",
                            status=Status.WARN,
                            reason=f"if {label} runs it on {b}: {finding.reason}",
                            backend=b,
                        ))  # fmt: skip

    linear_fp4 = [g for g in fp4 if g.layer.family == FAMILY_LINEAR]
    weight_only = rules.weight_only_backends(target, version)
    if linear_fp4 and weight_only and all(g.layer.scheme == SCHEME_W4A16 for g in linear_fp4):
        names = ", ".join(weight_only.backends)
        for b, backend in profile.backends.items():
            if backend.family != FAMILY_LINEAR or b in weight_only.backends:
                continue
            per_backend.setdefault(b, []).append(
                Finding(
                    f"model.linear.{b}.scheme",
                    Status.FAIL,
                    f"the checkpoint's linear layers are weight-only (W4A16): {label} runs them "
                    f"on {names}, not on {b}",
                    source=weight_only.source
                    + (
                        f" (unverified: {weight_only.unverified})" if weight_only.unverified else ""
                    ),
                    backend=b,
                    details={"layer": "linear"},
                )
            )
    return ModelVerdict(
        ckpt, tp, ep, tuple(gemms), tuple(standing), {b: tuple(fs) for b, fs in per_backend.items()}
    )


def _value(g: RankGemm, dim: str) -> int | None:
    if dim == "n":
        return g.n
    if dim == "k":
        return g.k
    return g.intermediate or None


def _misaligned(
    ckpt: Checkpoint,
    g: RankGemm,
    rule: Alignment,
    dim: str,
    value: int,
    where: str,
    label: str,
    profile: Profile,
    rules: ShapeRules,
    version: str,
) -> Finding:
    name = g.layer.name
    padded = f" (padded to a multiple of {rule.padded_to})" if rule.padded_to else ""
    dim_label = {"n": "N", "k": "K", "intermediate": "the MoE intermediate size"}[dim]
    reason = (
        f"{name} ({g.layer.scheme}) per rank at {where}: N={g.n}, K={g.k}; {dim_label} {value}"
        f"{padded} is not a multiple of {rule.multiple}: {rule.reason}"
    )
    fits = _tp_sizes(ckpt, g, lambda other: (v := _value(other, dim)) is None or rule.holds(v))
    fixes = [_tp_fix(fits)] if fits else []
    if rule.backends:
        fixes.append("or a backend without this limit (`fp4doctor explain` lists them; --prefer)")
    upgrade = _upgrade(rule, rules, dim, value)
    if upgrade:
        fixes.append(f"or pip install -U '{profile.engine.package}>={upgrade}'")
    source = rule.source + (f" (unverified: {rule.unverified})" if rule.unverified else "")
    details = {"layer": name, "dim": dim, "value": value, "multiple": rule.multiple,
               "rule": rule.id, "effect": rule.effect}  # fmt: skip
    return Finding(
        f"model.{name}.{dim}{rule.multiple}",
        Status.FAIL,
        reason,
        fix="; ".join(fixes) or None,
        source=source,
        details=details,
    )


def _tp_sizes(ckpt: Checkpoint, g: RankGemm, ok: Any) -> list[int]:
    """The usual TP sizes at which this layer's per-rank GEMM passes `ok`."""
    fits = []
    for tp in TP_SIZES:
        other = per_rank(g.layer, ckpt.config, tp)
        if other.problem is None and ok(other):
            fits.append(tp)
    return fits


def _tp_fix(fits: list[int]) -> str:
    if not fits:
        return "no tensor-parallel size from 1 to 16 fits; another parallel layout (EP, PP)"
    return "--tp " + " or ".join(str(t) for t in fits)


def _upgrade(rule: Alignment, rules: ShapeRules, dim: str, value: int) -> str | None:
    """The first release past `rule`'s range where no rule refuses this size, if any."""
    bound = next((s.version for s in rule.engine if s.operator == "<"), None)
    if bound is None:
        return None
    for other in rules.alignments:
        same = other.target == rule.target and other.family == rule.family
        if (
            same
            and dim in other.dims
            and other.backends == rule.backends
            and contains(other.engine, bound) is True
            and not other.holds(value)
        ):
            return None
    return bound
