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
from fp4doctor.checkpoint.activation import MoeActivation
from fp4doctor.checkpoint.constraints import ActivationSupport, Alignment, ShapeRules
from fp4doctor.checkpoint.layers import FAMILY_LINEAR, FAMILY_MOE, SCHEME_W4A16
from fp4doctor.checkpoint.parallel import RankGemm, per_rank
from fp4doctor.findings import Finding, Kind, Status, apply_ignores
from fp4doctor.profile.model import Profile
from fp4doctor.rules import Evaluation
from fp4doctor.rules.backends import conditions_hold
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
        run the model's GEMMs is not valid here, and the choice moves on. A backend the engine
        itself passes over for this model (the MoE activation or clamp) leaves its automatic
        order, as it does in the engine."""
        verdicts = {
            name: replace(v, findings=(*v.findings, *own))
            if (own := self.per_backend.get(name))
            else v
            for name, v in evaluation.verdicts.items()
        }
        order = tuple(b for b in evaluation.auto_order if not self.engine_skips(b))
        return replace(evaluation, verdicts=verdicts, auto_order=order)

    def engine_skips(self, backend: str) -> Finding | None:
        """The model finding for which the engine's automatic choice passes over `backend`."""
        return next(
            (f for f in self.per_backend.get(backend, ())
             if f.status.blocking and f.details.get("engine_skips")),
            None,
        )  # fmt: skip

    def engine_pick(self, evaluation: Evaluation) -> Finding | None:
        """A failure when the engine, left alone (no knob set), picks a backend that cannot run
        the model's GEMMs: it stops at model load (or worse), whatever fp4doctor would choose.
        The engine passes over a backend itself where it checks the model (the MoE activation
        and clamp: findings marked `engine_skips`): it picks the next in its order, and fails
        when none is left."""
        if not evaluation.facts.gpus or evaluation.env_selection is not None:
            return None
        # The automatic order before the model's skips (fold took them out).
        order = [
            s.backend for s in evaluation.era.auto
            if conditions_hold(s.conditions, evaluation.context)
        ]  # fmt: skip
        passed: list[tuple[str, Finding]] = []
        for backend in order:
            skip = self.engine_skips(backend)
            if skip is not None:
                passed.append((backend, skip))
                continue
            # Not the W4A4-only kernels' refusal of a weight-only checkpoint: the engine routes
            # weight-only layers to its weight-only kernels by itself, whatever its W4A4 pick.
            blocking = [
                f
                for f in self.per_backend.get(backend, ())
                if f.status.blocking and f.rule != "scheme"
            ]
            if not blocking:
                return None
            return self._pick_fails(evaluation, backend, blocking[0], passed)
        if not passed:
            return None
        first = passed[0][1]
        names = ", ".join(b for b, _ in passed)
        return Finding(
            f"model.engine_auto.{evaluation.family}",
            Status.FAIL,
            f"{evaluation.engine_label}, left alone, finds no {evaluation.family} backend for "
            f"this model ('No NvFp4 MoE backend supports the deployment configuration'): it "
            f"passes over {names}; {first.reason}",
            fix='eval "$(fp4doctor env)" (a backend that runs it, if one does here), or '
            + (first.fix or "another engine release"),
            backend=passed[0][0],
            source=first.source,
            details=dict(first.details),
            kind=Kind.ENGINE_PICK,
        )

    def _pick_fails(
        self,
        evaluation: Evaluation,
        backend: str,
        blocking: Finding,
        passed: list[tuple[str, Finding]],
    ) -> Finding:
        skipped = ""
        if passed:
            why = "; ".join(f"{b}: {f.details.get('why', f.id)}" for b, f in passed)
            skipped = f"passes over {', '.join(b for b, _ in passed)} ({why}) and "
        return Finding(
            f"model.engine_auto.{evaluation.family}",
            Status.FAIL,
            f"{evaluation.engine_label}, left alone, {skipped}picks {backend}, which cannot run "
            f"this model: {blocking.reason}",
            fix='eval "$(fp4doctor env)", or ' + (blocking.fix or "another --tp"),
            backend=backend,
            source=blocking.source,
            details=dict(blocking.details),
            kind=Kind.ENGINE_PICK,
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
                    kind=Kind.MODEL,
                )
            )

    activation = ckpt.moe_activation
    gated = activation.gated if activation else None
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
                    kind=Kind.MODEL,
                )
            )
            continue
        for rule in rules.alignments:
            if not rule.applies(target, version, g.layer.family, fmt, gated):
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

    if activation is not None and any(g.layer.family == FAMILY_MOE for g in fp4):
        _activation_findings(activation, profile, version, rules, label, standing, per_backend)

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
                    kind=Kind.MODEL,
                    rule="scheme",
                )
            )
    return ModelVerdict(
        ckpt, tp, ep, tuple(gemms), tuple(standing), {b: tuple(fs) for b, fs in per_backend.items()}
    )


def _activation_findings(
    act: MoeActivation,
    profile: Profile,
    version: str,
    rules: ShapeRules,
    label: str,
    standing: list[Finding],
    per_backend: dict[str, list[Finding]],
) -> None:
    """Each MoE backend that cannot run the model's activation, or does not apply the SwiGLU
    clamp it sets, gets the finding in its own verdict; a backend of a family this profile does
    not model, a warning. An activation fp4doctor does not know is said, and not judged."""
    applicable = rules.activation_rules(profile.target, version)
    if not applicable:
        return
    if not act.known:
        standing.append(
            Finding(
                "model.experts.activation",
                Status.WARN,
                f"the experts' activation is {act.describe()}: whether {label}'s MoE backends "
                "run it was not judged",
                details={"layer": "experts.gate_up", "key": act.key, "value": act.value},
                kind=Kind.MODEL,
            )
        )
        return
    for rule in applicable:
        for b in rule.backends:
            for finding in _activation_misses(act, rule, b, label):
                if b in profile.backends:
                    per_backend.setdefault(b, []).append(finding)
                else:
                    standing.append(replace(
                        finding, status=Status.WARN, reason=f"if {label} runs it on {b}: "
                        f"{finding.reason}",
                    ))  # fmt: skip


def _activation_misses(
    act: MoeActivation, rule: ActivationSupport, backend: str, label: str
) -> list[Finding]:
    source = rule.source + (f" (unverified: {rule.unverified})" if rule.unverified else "")
    limit = f"{act.swiglu_limit:g}" if act.swiglu_limit is not None else ""

    def said(template: str) -> str:
        text = template.replace("<ACT>", (act.name or "").upper()).replace("<L>", limit)
        return text.replace("<BACKEND>", backend)

    def how(template: str) -> str:
        if rule.engine_skips:
            return (
                f"; left alone, {label} passes over {backend}, and asked for it (--moe-backend) "
                f"it raises: {said(template)}"
            )
        return f": {said(template)}"

    details: dict[str, Any] = {"layer": "experts.gate_up", "rule": rule.id,
                               "activation": act.name, "key": act.key,
                               "engine_skips": rule.engine_skips}  # fmt: skip
    out = []
    if act.name not in rule.activations:
        out.append(
            Finding(
                f"model.experts.{backend}.activation",
                Status.FAIL,
                f"the experts run {act.describe()}, which {label}'s {backend} does not "
                f"support (it runs {', '.join(rule.activations)}){how(rule.error)}",
                fix="a MoE backend that runs it (`fp4doctor explain` lists them; --prefer)",
                source=source,
                backend=backend,
                details={**details, "why": f"no {act.label}"},
                kind=Kind.MODEL,
            )
        )
    if act.swiglu_limit is not None and not rule.clamp:
        out.append(
            Finding(
                f"model.experts.{backend}.swiglu_limit",
                Status.FAIL,
                f"config.json sets swiglu_limit={limit} (a SwiGLU clamp on the experts), which "
                f"{label}'s {backend} does not apply{how(rule.clamp_error or rule.error)}",
                fix="a MoE backend that applies the clamp (`fp4doctor explain` lists them)",
                source=source,
                backend=backend,
                details={**details, "limit": act.swiglu_limit, "why": f"swiglu_limit={limit}"},
                kind=Kind.MODEL,
            )
        )
    return out


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
    origin = ""
    if dim == "intermediate":
        full = g.layer.n // 2 if name.endswith("gate_up") else g.layer.k
        key = _config_key(ckpt.config, full, ("moe_intermediate_size", "intermediate_size"))
        if key:
            origin = f" (config.json {key} {full} over {full // value} ranks)"
    reason = (
        f"{name} ({g.layer.scheme}) per rank at {where}: N={g.n}, K={g.k}; {dim_label} {value}"
        f"{padded} is not a multiple of {rule.multiple}{origin}: {rule.reason}"
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
        kind=Kind.MODEL,
    )


def _config_key(config: Mapping[str, Any], value: int, keys: tuple[str, ...]) -> str | None:
    """The first of `keys` that config.json (or its text_config) sets to `value`."""
    sections = [config]
    if isinstance(config.get("text_config"), dict):
        sections.append(config["text_config"])
    for section in sections:
        for key in keys:
            if section.get(key) == value:
                return key
    return None


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
    if bound is None or not rule.upper_is_fix:
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
