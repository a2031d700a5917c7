"""The one severity policy for known bugs (profiles/advisories.yaml and a profile's own
advisories): whether a finding blocks, warns or passes.

An advisory blocks (fails its backend) only when all of these hold:

- its version range and GPUs hold here (otherwise there is no finding at all);
- its effect is a crash, a wrong output or a hang (`slow` and `warn` only warn);
- every condition of its trigger holds: none unknown, none on the data or the load (`data`),
  none that nothing can settle (`depends_on`); one ruled out clears it (a pass that says why);
- its evidence is `reproduced` or `fix-diff` (a profile's own advisory states its rule, and
  counts as read); a bug known only from a commit message or a title never blocks.

Otherwise it warns. Whether the backend is the one the deployment runs as set is decided where
the backends are weighed (resolve), from the finding's backend.
"""

from __future__ import annotations

from dataclasses import dataclass

from fp4doctor.findings import Status
from fp4doctor.profile.advisories import EVIDENCE_COMMIT_MESSAGE
from fp4doctor.profile.model import EFFECT_CRASH, EFFECT_HANG, EFFECT_WRONG_OUTPUT
from fp4doctor.profile.triggers import Settled

BLOCKING_EFFECTS = (EFFECT_CRASH, EFFECT_WRONG_OUTPUT, EFFECT_HANG)


@dataclass(frozen=True)
class Severity:
    """A known bug's status here, and why it does not block when it warns although its
    trigger holds (None otherwise)."""

    status: Status
    held_back: str | None = None


def severity(
    *, in_range: bool, effect: str, evidence: str | None, settled: Settled
) -> Severity | None:
    """An advisory's status: None (no finding) outside its version range and GPUs, PASS when
    its trigger is ruled out, FAIL when it blocks (the module's docstring), WARN otherwise."""
    if not in_range:
        return None
    if settled is Settled.RULED_OUT:
        return Severity(Status.PASS)
    if effect not in BLOCKING_EFFECTS or settled is Settled.UNKNOWN:
        return Severity(Status.WARN)
    if evidence == EVIDENCE_COMMIT_MESSAGE:
        return Severity(
            Status.WARN, "only the fix's commit message was read (evidence: commit-message)"
        )
    return Severity(Status.FAIL)
