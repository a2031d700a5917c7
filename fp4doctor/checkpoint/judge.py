"""The model's findings: what this engine release does with each rank's GEMMs.

Pure: a checkpoint, a profile, an engine version and a parallel size in; findings out. Two kinds:
- per backend (`per_backend`): a backend that cannot run one of the model's per-rank GEMMs (an
  unaligned N, K or MoE intermediate size it neither pads nor accepts; W4A4-only kernels for a
  weight-only checkpoint). The core folds them into that backend's verdict, so the choice steers
  to a backend that can run the model;
- standing (`findings`): what fails whatever the backend (a format this release does not read,
  a size TP does not divide, an alignment every backend of the release needs, a defect of the
  checkpoint's content this release loads as garbage or refuses: fp4doctor/checkpoint/
  content_judge.py).
The layers are judged as the release runs them: a ModelOpt `quant_algo: NVFP4` checkpoint is W4A4
to it even where a module stores no input scale, unless it reads weight-only config groups as
W4A16 (`content_judge.engine_scheme`).
Ids are `model.<layer class>.<...>`, so `--ignore model.experts` names all the MoE's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from fp4doctor.checkpoint import Checkpoint, content_judge
from fp4doctor.checkpoint.activation import MoeActivation
from fp4doctor.checkpoint.constraints import ActivationSupport, Alignment, ShapeRules
from fp4doctor.checkpoint.layers import FAMILY_LINEAR, FAMILY_MOE, SCHEME_W4A16
from fp4doctor.checkpoint.parallel import RankGemm, per_rank
from fp4doctor.findings import Finding, Kind, Status, apply_ignores
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
        run the model's GEMMs is not valid here, and the choice moves on. What the engine's own
        pick needs of the model goes with it: the backends its automatic order passes over for
        this model (the MoE activation or clamp, weight-only experts), as the engine does, and
        whether the family's layers are all weight-only (they take the weight-only branch)."""
        verdicts = {
            name: replace(v, findings=(*v.findings, *own))
            if (own := self.per_backend.get(name))
            else v
            for name, v in evaluation.verdicts.items()
        }
        skips = {b: f for b in evaluation.verdicts if (f := self.engine_skips(b)) is not None}
        layers = [
            g.layer for g in self.gemms if g.layer.fp4 and g.layer.family == evaluation.family
        ]
        weight_only = bool(layers) and all(layer.scheme == SCHEME_W4A16 for layer in layers)
        return replace(
            evaluation,
            verdicts=verdicts,
            skips=skips,
            weight_only=weight_only,
            checkpoint_format=self.checkpoint.quant.format,
        )

    def engine_skips(self, backend: str) -> Finding | None:
        """The model finding for which the engine's automatic choice passes over `backend`."""
        return next(
            (f for f in self.per_backend.get(backend, ())
             if f.status.blocking and f.details.get("engine_skips")),
            None,
        )  # fmt: skip

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
            "content": self.checkpoint.content.to_dict(),
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
    gemms = as_engine_runs(ckpt, ckpt.gemms(tp, ep), target, version, rules)
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

    for family in (FAMILY_LINEAR, FAMILY_MOE):
        layers = [g for g in fp4 if g.layer.family == family]
        if layers and all(g.layer.scheme == SCHEME_W4A16 for g in layers):
            _weight_only_findings(
                family, ckpt.quant.format, profile, version, rules, label, standing, per_backend
            )
    standing += content_judge.findings(ckpt, target, version, label, rules.content)
    return ModelVerdict(
        ckpt, tp, ep, tuple(gemms), tuple(standing), {b: tuple(fs) for b, fs in per_backend.items()}
    )


def as_engine_runs(
    ckpt: Checkpoint, gemms: list[RankGemm], target: str, version: str, rules: ShapeRules
) -> list[RankGemm]:
    """`gemms` with each NVFP4 layer's scheme the one `target` at `version` runs it as
    (content_judge.engine_scheme); the oracle's questions need the same (fp4doctor/oracle)."""
    out = []
    for g in gemms:
        scheme = (
            content_judge.engine_scheme(ckpt, target, version, g.layer.family, rules.content)
            if g.layer.fp4
            else None
        )
        if scheme is not None and scheme != g.layer.scheme:
            g = replace(g, layer=replace(g.layer, scheme=scheme))
        out.append(g)
    return out


def _weight_only_findings(
    family: str,
    fmt: str,
    profile: Profile,
    version: str,
    rules: ShapeRules,
    label: str,
    standing: list[Finding],
    per_backend: dict[str, list[Finding]],
) -> None:
    """Every FP4 layer of `family` is weight-only (W4A16): each backend of the family that runs
    only W4A4 layers gets the finding in its verdict. The linear family's weight-only layers go
    down the engine's weight-only branch whatever its W4A4 pick (selection/engine.py); the MoE's
    automatic order passes over experts backends that refuse weight-only experts, and one asked
    for by name raises. A release whose weight-only kernels are not known is said, not judged."""
    entry = rules.weight_only_backends(profile.target, version, family, fmt)
    what = "linear layers" if family == FAMILY_LINEAR else "experts"
    if entry is None:
        standing.append(
            Finding(
                f"model.{family}.weight_only",
                Status.WARN,
                f"the checkpoint's {what} are weight-only (W4A16): which of {label}'s {family} "
                "backends run them was not judged (fp4doctor has not read this release's "
                "weight-only kernels)",
                details={"layer": FAMILY_LINEAR if family == FAMILY_LINEAR else "experts.gate_up"},
                kind=Kind.MODEL,
                family=family,
            )
        )
        return
    names = ", ".join(entry.backends)
    for b, backend in profile.backends.items():
        if backend.family != family or b in entry.backends:
            continue
        if family == FAMILY_LINEAR:
            finding = Finding(
                f"model.linear.{b}.scheme",
                Status.FAIL,
                f"the checkpoint's linear layers are weight-only (W4A16): {label} runs them on "
                f"{names}, not on {b}",
                source=entry.cited,
                backend=b,
                details={"layer": FAMILY_LINEAR},
                kind=Kind.MODEL,
                rule="scheme",
            )
        else:
            finding = Finding(
                f"model.experts.{b}.scheme",
                Status.FAIL,
                f"the checkpoint's experts are weight-only (W4A16), which {label}'s {b} does not "
                f"run (weight-only experts run on {names}); left alone, {label} passes over "
                f"{b}, and asked for it (--moe-backend) it raises 'NvFp4 MoE backend ... does not "
                "support the deployment configuration since kernel does not support quantization "
                "scheme ...xNone'",
                fix="a MoE backend that runs weight-only experts (`fp4doctor explain` lists them)",
                source=entry.cited,
                backend=b,
                details={"layer": "experts.gate_up", "engine_skips": True,
                         "why": "no weight-only experts"},
                kind=Kind.MODEL,
                rule="scheme",
            )  # fmt: skip
        per_backend.setdefault(b, []).append(finding)


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
        full = g.layer.k
        if name.endswith("gate_up"):  # gated: gate and up side by side in N
            full = g.layer.n // 2 if g.layer.gated else g.layer.n
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
