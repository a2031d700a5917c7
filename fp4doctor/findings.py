"""The result model: findings with stable ids, one status each, a reason and a safe fix."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any


class Status(str, enum.Enum):
    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"
    ERROR = "error"

    @property
    def blocking(self) -> bool:
        """A status that makes whatever it is about unusable."""
        return self in (Status.FAIL, Status.ERROR)


class Kind(str, enum.Enum):
    """What a finding is about. The id names the finding for people (`--ignore`, `-v`); code
    decides by the kind, never by parsing the id."""

    HOST = "host"  # the host itself: GPUs seen, probe failures, unreadable metadata
    ENGINE = "engine"  # what the engine itself needs, whatever backend it runs
    REQUIREMENT = "requirement"  # one requirement of one backend
    HARDWARE = "hardware"  # a backend's compute-capability requirement: nothing else fixes it
    KNOB = "knob"  # whether this engine release can select a backend
    ADVISORY = "advisory"  # a known bug of a backend in this release
    LIVE = "live"  # a live GEMM's result, or how it compares with the rules
    ENV = "env"  # a variable as set in the environment
    ENGINE_PICK = "engine_pick"  # what the engine, left alone, picks
    CHOICE = "choice"  # the backend fp4doctor chooses
    REQUIRE = "require"  # a --require that does not resolve
    MODEL = "model"  # the checkpoint's GEMMs (--model)

    @property
    def stands(self) -> bool:
        """Whether a failure of this kind stands whatever backend is chosen (a backend's own
        requirements, knob and advisories stand only when that backend is chosen)."""
        return self not in (
            Kind.REQUIREMENT,
            Kind.HARDWARE,
            Kind.KNOB,
            Kind.ADVISORY,
            Kind.CHOICE,
            Kind.REQUIRE,
        )

    @property
    def env_fixes(self) -> bool:
        """Whether `fp4doctor env` fixes a failure of this kind: a variable as set, or an engine
        whose own pick cannot run here (the knobs steer it away)."""
        return self in (Kind.ENV, Kind.ENGINE_PICK)


class Symptom(str, enum.Enum):
    """What a known bug does when it strikes (advisories)."""

    CRASH = "crash"
    WRONG_OUTPUT = "wrong-output"
    HANG = "hang"
    SLOW = "slow"


@dataclass(frozen=True)
class Finding:
    """One checked fact: `backend.flashinfer-cudnn.cudnn_backend`, `smoke.emulation.gpu0`, ...

    `reason` states the measured and the required value; `fix` is a command or setting that is
    safe to run or set, shown to the user and never executed by fp4doctor. `kind`, `family`,
    `backend`, `rule` and `advisory` say what it is about, for code; the id is for people.
    """

    id: str
    status: Status
    reason: str
    fix: str | None = None
    gpu: int | None = None
    backend: str | None = None
    source: str | None = None  # where the rule comes from, for a reader to re-check
    ignored: bool = False  # downgraded from fail/error by --ignore
    details: dict[str, Any] = field(default_factory=dict)
    kind: Kind = field(kw_only=True)
    family: str | None = field(default=None, kw_only=True)  # None: every family (the host)
    rule: str | None = field(default=None, kw_only=True)  # the requirement's id in its profile
    advisory: str | None = field(default=None, kw_only=True)  # the advisory's own id
    # A known bug's trigger (the condition under which it strikes), and whether the facts, the
    # flags or the model establish it here. Only an established trigger fails a verdict.
    trigger: str | None = field(default=None, kw_only=True)
    established: bool = field(default=True, kw_only=True)
    symptom: Symptom | None = field(default=None, kw_only=True)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": self.id,
            "kind": self.kind.value,
            "status": self.status.value,
            "reason": self.reason,
        }
        for key in ("fix", "gpu", "backend", "family", "rule", "advisory", "source", "trigger"):
            value = getattr(self, key)
            if value is not None:
                data[key] = value
        if self.symptom is not None:
            data["symptom"] = self.symptom.value
        if self.trigger is not None or not self.established:
            data["established"] = self.established
        if self.ignored:
            data["ignored"] = True
        if self.details:
            data["details"] = self.details
        return data


def matches(finding: Finding, pattern: str) -> bool:
    """`--ignore` patterns name an id, a dotted prefix of ids (`backend.flashinfer-cudnn`), or
    the advisory a finding reports (the ids `fp4doctor advisories` lists)."""
    fid = finding.id
    return fid == pattern or fid.startswith(pattern + ".") or finding.advisory == pattern


def apply_ignores(findings: Iterable[Finding], patterns: Iterable[str]) -> list[Finding]:
    """Downgrade the named blocking findings to warnings; they stay in the report, marked."""
    pats = [p for p in patterns if p]
    out = []
    for f in findings:
        if f.status.blocking and any(matches(f, p) for p in pats):
            f = replace(f, status=Status.WARN, ignored=True, reason=f"{f.reason} (ignored)")
        out.append(f)
    return out
