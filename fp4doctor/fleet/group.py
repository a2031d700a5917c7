"""Many nodes' views into one fleet report: groups of identical nodes, outliers, counts.

- A *group* is the nodes whose redacted facts are identical but for when and where they were
  captured (`captured_at`, `hostname`, the `synthetic` note and the fp4doctor version): the same
  question then gets the same answer, so a group has one verdict and one `env`.
- A *cohort* is the nodes with the same GPUs (model, compute capability and count): nodes an
  operator means to be alike. Within a cohort the largest group is the baseline, and a node of
  another group is an *outlier*, named with what differs from the baseline: the driver, cuDNN,
  FlashInfer, the engine, then any other package, variable or fact. A node of the baseline's own
  facts whose check said something else (a live GEMM that failed on that node only) is an
  outlier too.
- Readiness is counted per FP4 GEMM family (linear, moe) over the nodes that were judged; a node
  whose task failed or whose facts could not be read is listed apart.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from fp4doctor import facts
from fp4doctor.fleet.view import NodeView

IDENTITY = ("captured_at", "hostname", "synthetic", "fp4doctor_version")
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
class Group:
    id: str  # "g1": the largest group first
    nodes: tuple[NodeView, ...]

    @property
    def typical(self) -> NodeView:
        """The node that stands for the group: one with the verdict most of its nodes share
        (their facts are the same; a live GEMM can still fail on one of them)."""
        usual = Counter(_verdict(n) for n in self.nodes).most_common(1)[0][0]
        return next(n for n in self.nodes if _verdict(n) == usual)

    @property
    def names(self) -> list[str]:
        return [n.name for n in self.nodes]


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
    nodes: tuple[NodeView, ...]
    groups: tuple[Group, ...]
    outliers: tuple[Outlier, ...]
    failed: tuple[NodeView, ...]  # no check ran: the task failed, the facts were unreadable
    families: dict[str, dict[str, int]] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    # Per family, the nodes whose first start-up compiles or tunes (fp4doctor/coldstart).
    cold_start: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def outcome(self) -> str:
        """ "ready" when every node is, "not ready" when one was judged not ready, else "no
        verdict" (a node without a verdict, or no node at all)."""
        judged = [n for n in self.nodes if n.error is None]
        if any(n.outcome == "not ready" for n in judged):
            return "not ready"
        if self.nodes and not self.failed and all(n.ready for n in judged):
            return "ready"
        return "no verdict"

    @property
    def exit_code(self) -> int:
        return {"ready": 0, "not ready": 1, "no verdict": 3}[self.outcome]

    def group_of(self, name: str) -> Group | None:
        return next((g for g in self.groups if name in g.names), None)


def fingerprint(host: dict[str, Any]) -> str:
    """A short hash of the facts that decide the answer (all but the identity fields)."""
    kept = {k: v for k, v in host.items() if k not in IDENTITY}
    text = json.dumps(kept, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


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


def build(views: Iterable[NodeView], notes: Sequence[str] = ()) -> FleetReport:
    """The fleet report of these nodes' views (in any order: the report sorts them by name)."""
    nodes = tuple(sorted((_readable(v) for v in views), key=lambda n: n.name))
    judged = [n for n in nodes if n.error is None and n.facts]
    failed = tuple(n for n in nodes if n.error is not None or not n.facts)
    by_key: dict[str, list[NodeView]] = {}
    for n in judged:
        by_key.setdefault(fingerprint(n.facts), []).append(n)
    ordered = sorted(by_key.values(), key=lambda ns: (-len(ns), ns[0].name))
    groups = tuple(Group(f"g{i}", tuple(ns)) for i, ns in enumerate(ordered, 1))
    outliers = _outliers(groups)
    families: dict[str, Counter[str]] = {}
    for n in judged:
        for name, fam in n.families.items():
            families.setdefault(name, Counter())[fam.outcome] += 1
    counts = {name: {o: c.get(o, 0) for o in OUTCOMES} for name, c in sorted(families.items())}
    return FleetReport(nodes, groups, outliers, failed, counts, tuple(notes), _cold_counts(judged))


COLD_COUNTS = ("will JIT", "cannot JIT", "will autotune")


def _cold_counts(nodes: list[NodeView]) -> dict[str, dict[str, int]]:
    """Per family: how many nodes will JIT-build, cannot build, will autotune at first start."""
    out: dict[str, Counter[str]] = {}
    for n in nodes:
        for name, fam in n.families.items():
            c = out.setdefault(name, Counter())
            c["will JIT"] += fam.jit == "will-build"
            c["cannot JIT"] += fam.jit == "cannot-build"
            c["will autotune"] += fam.autotune == "will-tune"
    return {name: {k: c[k] for k in COLD_COUNTS} for name, c in sorted(out.items())}


def _readable(n: NodeView) -> NodeView:
    """A node whose facts this fp4doctor cannot read (a newer schema from a newer node) is a
    node not judged, not the end of the report."""
    if n.error is not None or not n.facts:
        return n
    try:
        n.host()
    except facts.FactsError as exc:
        return replace(n, outcome="error", exit_code=3, error=str(exc))
    return n


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
            for n in g.nodes:
                if _verdict(n) != _verdict(peer):
                    found.append(
                        Outlier(n.name, g.id, g.id, len(g.nodes), (), _verdict_text(n, peer))
                    )
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
            for n in g.nodes:
                found.append(Outlier(n.name, g.id, base.id, len(base.nodes), diffs, verdict))
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
        other = sorted(
            k
            for k in set(my_facts) | set(their_facts)
            if k not in IDENTITY and my_facts.get(k) != their_facts.get(k)
        )
        diffs = [Difference("other", k, "differs", "another value") for k in other]
    return tuple(diffs)
