"""Many nodes' views into one fleet report: groups of identical nodes, outliers, counts.

- A *group* is the nodes of one group key (fleet/key.py: the redacted facts, but for when and
  by which fp4doctor they were captured): the same question then gets the same answer, so a
  group has one verdict and one `env`, judged once (fleet/fleet.py).
- A *cohort* is the nodes with the same GPUs (model, compute capability and count): nodes an
  operator means to be alike. Within a cohort the largest group is the baseline, and a node of
  another group is an *outlier*, named with what differs from the baseline: the driver, cuDNN,
  FlashInfer, the engine, then any other package, variable or fact. A node of the baseline's own
  facts whose check said something else (a live GEMM that failed on that node only) is an
  outlier too.
- Readiness is counted per FP4 GEMM family (linear, moe) over the nodes that were judged; a node
  whose task failed or whose facts could not be read is listed apart.

The report is gathered node by node (`Gather`) and holds one view per distinct verdict of each
group, and the names: its memory grows with the groups, not with the nodes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from fp4doctor import facts
from fp4doctor.fleet.key import Keyed, Keys
from fp4doctor.fleet.view import NodeView

OUTCOMES = ("ready", "not ready", "no verdict")
# What an outlier's differences are sorted by: the kinds an operator looks at first.
KINDS = ("driver", "cuDNN", "FlashInfer", "engine", "package", "environment", "other")
ENGINE_PACKAGES = ("vllm", "sglang", "sgl-kernel", "tensorrt-llm")


@dataclass(frozen=True)
class Difference:
    """One fact on which a node differs from its cohort's baseline."""

    kind: str  # one of KINDS
    what: str  # "flashinfer-cubin", "driver", "env VLLM_NVFP4_GEMM_BACKEND"
    node: str | None
    peers: str | None

    def text(self) -> str:
        return f"{self.what}: {self.node or 'absent'} (peers: {self.peers or 'absent'})"


@dataclass(frozen=True)
class Part:
    """The nodes of one group whose check said the same; one view stands for them all."""

    view: NodeView
    names: tuple[str, ...]  # sorted


@dataclass(frozen=True)
class Group:
    id: str  # "g1": the largest group first
    parts: tuple[Part, ...]  # by verdict, the most nodes first

    @property
    def typical(self) -> NodeView:
        """The view that stands for the group: the verdict most of its nodes got (their facts
        are the same; a live GEMM can still fail on one of them)."""
        return self.parts[0].view

    @property
    def names(self) -> list[str]:
        return sorted(n for p in self.parts for n in p.names)

    @property
    def size(self) -> int:
        return sum(len(p.names) for p in self.parts)


@dataclass(frozen=True)
class Outlier:
    node: str
    group: str
    baseline: str  # the group it is compared with
    baseline_nodes: int
    differences: tuple[Difference, ...]
    verdict: str | None = None  # "not ready where its peers are ready", when the verdicts differ

    @property
    def reason(self) -> str:
        parts = [d.text() for d in self.differences[:4]]
        if len(self.differences) > 4:
            parts.append(f"and {len(self.differences) - 4} more")
        if not self.differences:
            parts.append("the same facts as its peers")
        if self.verdict:
            parts.append(self.verdict)
        return "; ".join(parts)


@dataclass(frozen=True)
class FleetReport:
    groups: tuple[Group, ...]
    outliers: tuple[Outlier, ...]
    failed: tuple[NodeView, ...]  # no check ran: the task failed, the facts were unreadable
    families: dict[str, dict[str, int]] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    # Per family, the nodes whose first start-up compiles or tunes (fp4doctor/coldstart).
    cold_start: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def size(self) -> int:
        """Every node, judged or not."""
        return self.judged + len(self.failed)

    @property
    def judged(self) -> int:
        return sum(g.size for g in self.groups)

    @property
    def ready(self) -> int:
        """How many nodes were judged ready."""
        return sum(len(p.names) for g in self.groups for p in g.parts if p.view.ready)

    @property
    def outcome(self) -> str:
        """ "ready" when every node is, "not ready" when one was judged not ready, else "no
        verdict" (a node without a verdict, or no node at all)."""
        views = [p.view for g in self.groups for p in g.parts]
        if any(v.outcome == "not ready" for v in views):
            return "not ready"
        if views and not self.failed and all(v.ready for v in views):
            return "ready"
        return "no verdict"

    @property
    def exit_code(self) -> int:
        return {"ready": 0, "not ready": 1, "no verdict": 3}[self.outcome]

    def group_of(self, name: str) -> Group | None:
        return next((g for g in self.groups if name in g.names), None)


class Gather:
    """A fleet report gathered node by node: one view per distinct verdict of each group, and
    the nodes' names (memory grows with the groups, not with the nodes)."""

    def __init__(self) -> None:
        self._groups: dict[str, dict[tuple[object, ...], tuple[NodeView, list[str]]]] = {}
        self._failed: list[NodeView] = []

    def add(self, keyed: Keyed, name: str, node: NodeView) -> None:
        """Node `name`, of group `keyed`, whose check said `node`: a view that may stand for
        many nodes (a part keeps the first such view, with the group's facts and this name)."""
        parts = self._groups.setdefault(keyed.key, {})
        verdict = _verdict(node)
        part = parts.get(verdict)
        if part is None:
            parts[verdict] = (replace(node, name=name, facts=keyed.data), [name])
        else:
            part[1].append(name)

    def fail(self, node: NodeView) -> None:
        """A node on which no check ran."""
        self._failed.append(node)

    @property
    def empty(self) -> bool:
        return not self._groups and not self._failed

    def report(self, notes: Sequence[str] = ()) -> FleetReport:
        """The fleet report of the nodes gathered so far."""
        grouped = [
            sorted(
                (Part(v, tuple(sorted(ns))) for v, ns in parts.values()),
                key=lambda p: (-len(p.names), p.names[0]),
            )
            for parts in self._groups.values()
        ]
        grouped.sort(key=lambda ps: (-sum(len(p.names) for p in ps), min(p.names[0] for p in ps)))
        groups = tuple(Group(f"g{i}", tuple(ps)) for i, ps in enumerate(grouped, 1))
        families: dict[str, dict[str, int]] = {}
        for g in groups:
            for p in g.parts:
                for name, fam in p.view.families.items():
                    counts = families.setdefault(name, dict.fromkeys(OUTCOMES, 0))
                    counts[fam.outcome] = counts.get(fam.outcome, 0) + len(p.names)
        failed = tuple(sorted(self._failed, key=lambda n: n.name))
        return FleetReport(
            groups,
            _outliers(groups),
            failed,
            dict(sorted(families.items())),
            tuple(notes),
            _cold_counts(groups),
        )


def build(views: Iterable[NodeView], notes: Sequence[str] = ()) -> FleetReport:
    """The fleet report of these views, each one node's own check, in any order. A view whose
    facts this fp4doctor cannot read (a newer schema from a newer node) is a node not judged,
    not the end of the report."""
    keys, gathered = Keys(), Gather()
    for n in views:
        if n.error is not None or not n.facts:
            gathered.fail(n)
            continue
        try:
            keyed = keys.of(n.facts, f"node {n.name}")
        except facts.FactsError as exc:
            gathered.fail(replace(n, outcome="error", exit_code=3, error=str(exc)))
            continue
        gathered.add(keyed, n.name, n)
    return gathered.report(notes)


def hardware(host: dict[str, Any]) -> tuple[tuple[str, int, int], ...]:
    """The GPUs as a cohort key: (name, compute capability) per GPU, sorted. A host without a
    GPU list is keyed by NVML's status: "no GPU" and "NVML cannot tell" are not one cohort."""
    gpus = host.get("gpus") or []
    if not gpus:
        return ((f"nvml:{(host.get('nvml') or {}).get('status')}", 0, 0),)
    return tuple(
        sorted(
            (str(g.get("name")), int(g.get("cc_major", 0)), int(g.get("cc_minor", 0))) for g in gpus
        )
    )


def software(host: facts.HostFacts) -> dict[tuple[str, str], str | None]:
    """(kind, what) -> version or value, for every fact an outlier is compared on."""
    out: dict[tuple[str, str], str | None] = {
        ("driver", "driver"): host.nvml.driver_version,
        ("driver", "CUDA driver"): host.nvml.cuda_driver_version,
        ("cuDNN", "cuDNN (loaded)"): host.cudnn.frontend.version_text,
    }
    for name, version in host.packages.versions.items():
        if name.startswith("flashinfer"):
            kind = "FlashInfer"
        elif "cudnn" in name:
            kind = "cuDNN"
        elif name in ENGINE_PACKAGES:
            kind = "engine"
        else:
            kind = "package"
        out[(kind, name)] = version
    out[("package", "torch CUDA")] = host.packages.torch_cuda
    out[("package", "nvcc")] = host.toolchain.nvcc_version
    for name, value in host.env.items():
        out[("environment", f"env {name}")] = value
    return out


COLD_COUNTS = ("will JIT", "cannot JIT", "will autotune")


def _cold_counts(groups: Sequence[Group]) -> dict[str, dict[str, int]]:
    """Per family: how many nodes will JIT-build, cannot build, will autotune at first start."""
    out: dict[str, Counter[str]] = {}
    for g in groups:
        for p in g.parts:
            for name, fam in p.view.families.items():
                c = out.setdefault(name, Counter())
                c["will JIT"] += len(p.names) * (fam.jit == "will-build")
                c["cannot JIT"] += len(p.names) * (fam.jit == "cannot-build")
                c["will autotune"] += len(p.names) * (fam.autotune == "will-tune")
    return {name: {k: c[k] for k in COLD_COUNTS} for name, c in sorted(out.items())}


def _verdict(n: NodeView) -> tuple[object, ...]:
    return n.outcome, n.chosen, tuple(sorted((k, f.outcome) for k, f in n.families.items()))


def _outliers(groups: Sequence[Group]) -> tuple[Outlier, ...]:
    cohorts: dict[tuple[tuple[str, int, int], ...], list[Group]] = {}
    for g in groups:
        cohorts.setdefault(hardware(g.typical.facts), []).append(g)
    found: list[Outlier] = []
    for members in cohorts.values():
        base = members[0]  # groups are sorted largest first
        # Inside a group: the same facts, another verdict (a live GEMM failed on one node).
        for g in members:
            peer = g.typical
            for p in g.parts[1:]:
                text = _verdict_text(p.view, peer)
                found += [Outlier(n, g.id, g.id, g.size, (), text) for n in p.names]
        if len(members) < 2:
            continue
        base_facts = base.typical.host()
        assert base_facts is not None
        base_soft = software(base_facts)
        for g in members[1:]:
            host = g.typical.host()
            assert host is not None
            diffs = _differences(software(host), base_soft, g.typical.facts, base.typical.facts)
            verdict = (
                _verdict_text(g.typical, base.typical)
                if _verdict(g.typical) != _verdict(base.typical)
                else None
            )
            found += [Outlier(n, g.id, base.id, base.size, diffs, verdict) for n in g.names]
    return tuple(sorted(found, key=lambda o: o.node))


def _verdict_text(n: NodeView, peer: NodeView) -> str:
    """How this node's verdict differs from its peer's: per family where both have families."""
    parts = []
    for name, fam in n.families.items():
        theirs = peer.families.get(name)
        if theirs is None or (fam.outcome, fam.chosen) == (theirs.outcome, theirs.chosen):
            continue
        why = f" ({fam.reason})" if fam.reason and fam.outcome != "ready" else ""
        parts.append(f"{name}: {fam.outcome}{why} where its peers are {theirs.outcome}")
    if not parts:
        why = f" ({n.blocking[0]})" if n.blocking and not n.ready else ""
        parts.append(f"{n.outcome}{why} where its peers are {peer.outcome}")
    return "; ".join(parts)


def _differences(
    mine: dict[tuple[str, str], str | None],
    theirs: dict[tuple[str, str], str | None],
    my_facts: dict[str, Any],
    their_facts: dict[str, Any],
) -> tuple[Difference, ...]:
    diffs = [
        Difference(kind, what, mine.get((kind, what)), theirs.get((kind, what)))
        for kind, what in sorted(
            set(mine) | set(theirs), key=lambda kw: (KINDS.index(kw[0]), kw[1])
        )
        if mine.get((kind, what)) != theirs.get((kind, what))
    ]
    if not diffs:  # the software agrees: say which other facts do not
        # (A group's facts leave out when and by what they were captured: fleet/key.py.)
        other = sorted(
            k for k in set(my_facts) | set(their_facts) if my_facts.get(k) != their_facts.get(k)
        )
        diffs = [Difference("other", k, "differs", "another value") for k in other]
    return tuple(diffs)
