"""One node's report as the fleet and the node outputs see it: plain data that crosses a process
boundary (a Ray task returns it as a dict) and is rendered without the profile or the rules.

Built on the node that was judged (`of`), so that a fleet never re-judges a node: what the fleet
reports is what that node's own check said.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fp4doctor import __version__
from fp4doctor import facts as F

if TYPE_CHECKING:
    from fp4doctor.coldstart.verdict import ColdStart
    from fp4doctor.doctor import Report

VIEW_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Family:
    """One FP4 GEMM family's verdict on a node: "ready", "not ready" or "no verdict"."""

    outcome: str
    chosen: str | None = None
    reason: str | None = None  # what stands in this family's way, when it is not ready
    jit: str | None = None  # the chosen backend's cold start (fp4doctor/coldstart): JIT state
    autotune: str | None = None  # and autotune state; None before it was judged


@dataclass(frozen=True)
class NodeView:
    """What one node's check said, and the (redacted) facts it was judged on."""

    name: str
    outcome: str  # "ready" | "not ready" | "no verdict"; "error" when no check ran at all
    exit_code: int  # fp4doctor's: 0, 1, 3 (2 for a question that could not be asked)
    facts: dict[str, Any] = field(default_factory=dict)  # F.to_dict(F.redact(...))
    target: str | None = None
    engine: str | None = None  # "vLLM 0.15.1"
    engine_version: str | None = None
    gpus: str = ""  # "8× NVIDIA B200 (10.0)"
    chosen: str | None = None  # the first family's choice (the dense linear GEMM)
    families: dict[str, Family] = field(default_factory=dict)
    backends: dict[str, bool] = field(default_factory=dict)  # every family's: valid here
    native: dict[str, bool] = field(default_factory=dict)  # backend: native FP4 (not Marlin)
    env_set: tuple[tuple[str, str], ...] = ()  # what `fp4doctor env` would export
    env_unset: tuple[str, ...] = ()
    blocking: tuple[str, ...] = ()  # one reason per line, what stands in the way
    error: str | None = None  # why this node has no report (task failed, facts unreadable)
    fp4doctor_version: str = __version__

    @property
    def ready(self) -> bool:
        return self.outcome == "ready"

    def host(self) -> F.HostFacts | None:
        """The facts back as `HostFacts` (None for a node without facts)."""
        if not self.facts:
            return None
        return F.from_dict(self.facts, f"node {self.name}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": VIEW_SCHEMA_VERSION,
            "name": self.name,
            "outcome": self.outcome,
            "exit_code": self.exit_code,
            "target": self.target,
            "engine": self.engine,
            "engine_version": self.engine_version,
            "gpus": self.gpus,
            "chosen": self.chosen,
            "families": {
                k: {
                    "outcome": f.outcome,
                    "chosen": f.chosen,
                    "reason": f.reason,
                    "jit": f.jit,
                    "autotune": f.autotune,
                }
                for k, f in self.families.items()
            },
            "backends": dict(self.backends),
            "native": dict(self.native),
            "env": {"set": dict(self.env_set), "unset": list(self.env_unset)},
            "blocking": list(self.blocking),
            "error": self.error,
            "fp4doctor_version": self.fp4doctor_version,
            "facts": self.facts,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> NodeView:
        env = data.get("env") or {}
        return cls(
            name=str(data["name"]),
            outcome=str(data["outcome"]),
            exit_code=int(data["exit_code"]),
            facts=dict(data.get("facts") or {}),
            target=data.get("target"),
            engine=data.get("engine"),
            engine_version=data.get("engine_version"),
            gpus=str(data.get("gpus") or ""),
            chosen=data.get("chosen"),
            families={
                k: Family(
                    str(v["outcome"]),
                    v.get("chosen"),
                    v.get("reason"),
                    v.get("jit"),
                    v.get("autotune"),
                )
                for k, v in (data.get("families") or {}).items()
            },
            backends={str(k): bool(v) for k, v in (data.get("backends") or {}).items()},
            native={str(k): bool(v) for k, v in (data.get("native") or {}).items()},
            env_set=tuple((str(k), str(v)) for k, v in (env.get("set") or {}).items()),
            env_unset=tuple(str(n) for n in env.get("unset") or ()),
            blocking=tuple(str(b) for b in data.get("blocking") or ()),
            error=data.get("error"),
            fp4doctor_version=str(data.get("fp4doctor_version") or ""),
        )


def of(name: str, report: Report) -> NodeView:
    """The view of one node's report: its verdict per family, its valid backends, and what
    `fp4doctor env` would export there (the same `exports_for` as `env`)."""
    from fp4doctor import render
    from fp4doctor.doctor import Outcome
    from fp4doctor.emit.knobs import exports_for, settings

    outcome = report.outcome
    families = _families(report)
    # Every family's backends (the MoE ones too, where the report judges that family).
    evaluations = [p.evaluation for p in report.families]
    env_set: tuple[tuple[str, str], ...] = ()
    env_unset: tuple[str, ...] = ()
    # What `fp4doctor env` exports there (cli.py `env`: nothing unless the report is usable;
    # else every family's knobs together).
    if report.usable:
        chosen = settings([p.resolution for p in report.families])
        exports, _notes = exports_for(report.profile, chosen, report.engine_label)
        env_set, env_unset = exports.set, exports.unset
    return NodeView(
        name=name,
        outcome=outcome.value,
        exit_code=outcome.exit_code,
        facts=F.to_dict(F.redact(report.facts)),
        target=report.profile.target,
        engine=report.engine_label,
        engine_version=report.engine.version,
        gpus=render.host_line(report.facts, unknown=outcome is Outcome.NO_VERDICT),
        chosen=render.uses(report) if report.usable else None,
        families=families,
        backends={n: v.valid for e in evaluations for n, v in e.verdicts.items()},
        native={n: e.profile.backends[n].native for e in evaluations for n in e.verdicts},
        env_set=env_set,
        env_unset=env_unset,
        blocking=tuple(dict.fromkeys(f.reason for f in report.blocking())),
    )


def failed(name: str, error: str, host: dict[str, Any] | None = None) -> NodeView:
    """A node on which no check ran (its task failed, its facts could not be read)."""
    return NodeView(name=name, outcome="error", exit_code=3, facts=host or {}, error=error)


def _families(report: Report) -> dict[str, Family]:
    """The verdict per FP4 GEMM family (linear, moe), as the report defines it (`family_ready`);
    the reason is the family's own first blocking finding, else the report's."""
    from fp4doctor.doctor import Outcome

    outcome = report.outcome
    blocking = report.blocking()
    first = blocking[0].reason if blocking and outcome is not Outcome.READY else None
    if outcome is Outcome.NO_VERDICT:
        return {
            p.family: Family(outcome.value, None, first, *_cold(p.cold_start))
            for p in report.families
        }
    out: dict[str, Family] = {}
    for p in report.families:
        if report.family_ready(p):
            out[p.family] = Family("ready", p.chosen, None, *_cold(p.cold_start))
            continue
        # Its own failures, else the host's (which block every family), else the report's.
        own = [f for f in blocking if f.family == p.family] or [
            f for f in blocking if f.family is None
        ]
        reason = own[0].reason if own else first
        out[p.family] = Family("not ready", None, reason, *_cold(p.cold_start))
    return out


def _cold(cold: ColdStart | None) -> tuple[str | None, str | None]:
    """The JIT and autotune states of a family's cold start (None when not judged)."""
    return (cold.jit.state, cold.autotune.state) if cold is not None else (None, None)
