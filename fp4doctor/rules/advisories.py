"""Which known problems of the data set (profiles/advisories.yaml) affect this host, whatever
target and backend is asked about: `fp4doctor advisories`."""

from __future__ import annotations

from dataclasses import dataclass

from fp4doctor import facts as F
from fp4doctor.profile.advisories import KnownIssue
from fp4doctor.profile.kinds import Context


@dataclass(frozen=True)
class Affected:
    issue: KnownIssue
    gpus: tuple[int, ...]  # the GPUs it affects (empty when it does not depend on the GPU)


def affecting(issues: tuple[KnownIssue, ...], host: F.HostFacts) -> list[Affected]:
    """The issues whose every condition holds on `host` (on at least one GPU where a compute
    capability is named), in the data set's order."""
    ctx = Context(facts=host, versions=host.packages.versions, env=host.env)
    out: list[Affected] = []
    for issue in issues:
        conditions = issue.conditions()
        if not all(c.check(ctx, None).ok for c in conditions if not c.per_gpu):
            continue
        per_gpu = [c for c in conditions if c.per_gpu]
        if not per_gpu:
            out.append(Affected(issue, ()))
            continue
        gpus = tuple(g.index for g in host.gpus if all(c.check(ctx, g).ok for c in per_gpu))
        if gpus:
            out.append(Affected(issue, gpus))
    return out
