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


@dataclass(frozen=True)
class Finding:
    """One checked fact: `backend.flashinfer-cudnn.cudnn_backend`, `smoke.emulation.gpu0`, ...

    `reason` states the measured and the required value; `fix` is a command or setting that is
    safe to run or set, shown to the user and never executed by fp4doctor.
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

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"id": self.id, "status": self.status.value, "reason": self.reason}
        for key in ("fix", "gpu", "backend", "source"):
            value = getattr(self, key)
            if value is not None:
                data[key] = value
        if self.ignored:
            data["ignored"] = True
        if self.details:
            data["details"] = self.details
        return data


def matches(finding_id: str, pattern: str) -> bool:
    """`--ignore` patterns name an id or a dotted prefix of ids (`backend.flashinfer-cudnn`)."""
    return finding_id == pattern or finding_id.startswith(pattern + ".")


def apply_ignores(findings: Iterable[Finding], patterns: Iterable[str]) -> list[Finding]:
    """Downgrade the named blocking findings to warnings; they stay in the report, marked."""
    pats = [p for p in patterns if p]
    out = []
    for f in findings:
        if f.status.blocking and any(matches(f.id, p) for p in pats):
            f = replace(f, status=Status.WARN, ignored=True, reason=f"{f.reason} (ignored)")
        out.append(f)
    return out
