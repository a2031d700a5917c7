"""`fp4doctor fleet --ray`: one task pinned to each alive node of a Ray cluster, each probing and
checking on its own node, their views gathered into one fleet report.

Ray does the fan-out (an engine operators of vLLM and SGLang fleets already run); this module is
imported only by `fleet --ray`, so nothing else loads ray (an optional extra: `fp4doctor[fleet]`).

- Pinning: `NodeAffinitySchedulingStrategy(node_id, soft=False)` (ray `python/ray/util/
  scheduling_strategies.py`): the task runs on that node or fails; it never lands elsewhere and
  reports another node's facts.
- The task asks for no CPU and no GPU (`num_cpus=0`), so it runs beside whatever holds the node's
  resources (a serving replica holds every GPU) and Ray leaves the node's CUDA_VISIBLE_DEVICES as
  the raylet has it (Ray 2.60 `_private/utils.py` `set_visible_accelerator_ids` overrides it only
  for a task given accelerators; older releases: unverified). fp4doctor must be installed on every
  node, in the environment the engine runs in: the probe reads that environment's packages.
- A simulated node (tests, benchmarks, a dry run) is given its own facts snapshot instead of its
  probe: a custom resource named `fp4doctor-facts:<path>` on the node (`ray start --resources
  '{"fp4doctor-facts:/snap/b200-07.json": 1}'`, `Cluster.add_node(resources=...)`), read by the
  driver from `ray.nodes()` and handed to that node's task, or the variable `FP4DOCTOR_FACTS` in
  the raylet's environment, which its workers inherit. The path is read on the node.
- Each distinct group of facts is judged once, as offline (fleet/fleet.py): without `--smoke` a
  task only gathers its node's facts (probed for the profile's packages, as `check` probes, and
  redacted there) and the driver judges each group; with `--smoke` each task runs its node's
  whole check, since a live GEMM can fail on one node of a group only. Answers are taken as they
  come and reduced to their group: the driver holds the groups and the names, not every node's
  facts.
"""

from __future__ import annotations

import logging
import os
import time
from collections import Counter
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from fp4doctor import facts
from fp4doctor.fleet import group, key, view
from fp4doctor.fleet.fleet import Judge

if TYPE_CHECKING:
    from fp4doctor.doctor import Question

FACTS_ENV = "FP4DOCTOR_FACTS"
FACTS_RESOURCE = "fp4doctor-facts:"
DEFAULT_TIMEOUT_S = 120.0
ANSWERS_AT_ONCE = 64  # taken from the object store together, then dropped


class FanoutError(RuntimeError):
    """The cluster cannot be reached, or has no alive node."""


def _check_on_node(
    question: dict[str, Any], facts_file: str | None, name: str | None, node_id: str
) -> dict[str, Any]:
    """The task: on this node, read its facts snapshot (when it was given one) or probe it, and
    return them (`{"name", "facts"}`, redacted), or with live GEMMs asked for, run the whole
    check and return its view (`{"view"}`): plain data, which crosses Ray's object store
    without custom pickling."""
    import socket

    from fp4doctor.doctor import Question, QuestionError, diagnose, facts_for

    path = facts_file or os.environ.get(FACTS_ENV) or None
    label = name or (Path(path).stem if path else socket.gethostname())
    here = ray.get_runtime_context().get_node_id()
    if here != node_id:  # the pinning is the whole point: never report another node's facts
        failed = view.failed(label, f"ran on node {here[:8]}, not on {node_id[:8]}")
        return {"view": failed.to_dict()}
    q = Question(**question)
    if path:
        q = replace(q, facts_file=path, smoke=False)
    try:
        if not q.smoke:
            return {"name": label, "facts": facts.to_dict(facts.redact(facts_for(q)))}
        return {"view": view.of(label, diagnose(q)).to_dict()}
    except (facts.FactsError, QuestionError) as exc:
        return {"view": view.failed(label, str(exc)).to_dict()}


_remote_check = ray.remote(num_cpus=0, max_retries=0)(_check_on_node)


def facts_resource(resources: dict[str, Any]) -> str | None:
    """The snapshot path a node's custom resource names, if any."""
    for name in resources:
        if name.startswith(FACTS_RESOURCE):
            return name[len(FACTS_RESOURCE) :]
    return None


def connect(address: str | None) -> None:
    """Join the cluster at `address` ("auto": the one `ray start` left on this host, or
    RAY_ADDRESS) unless this process is already connected."""
    if ray.is_initialized():
        return
    try:
        ray.init(address=address or "auto", logging_level=logging.ERROR, log_to_driver=False)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise FanoutError(f"cannot reach a Ray cluster at {address or 'auto'}: {first}") from None


def run(question: Question, timeout_s: float = DEFAULT_TIMEOUT_S) -> group.FleetReport:
    """One pinned task per alive node of the connected cluster; their views, as a fleet report.
    A node that fails or does not answer within `timeout_s` is a failed node in the report."""
    nodes = [n for n in ray.nodes() if n.get("Alive")]  # type: ignore[no-untyped-call]
    if not nodes:
        raise FanoutError("the Ray cluster has no alive node")
    asked = {k: v for k, v in asdict(question).items() if k != "facts_file"}
    calls = {}
    for n in nodes:
        facts_file = facts_resource(n.get("Resources") or {})
        name = Path(facts_file).stem if facts_file else None
        strategy = NodeAffinitySchedulingStrategy(node_id=n["NodeID"], soft=False)
        ref = _remote_check.options(scheduling_strategy=strategy).remote(
            asked, facts_file, name, n["NodeID"]
        )
        calls[ref] = n
    keys, judge = key.Keys(), Judge(question)
    answers: list[tuple[str, key.Keyed | None, view.NodeView, str]] = []
    pending, deadline = list(calls), time.monotonic() + timeout_s
    while pending and (left := deadline - time.monotonic()) > 0:
        batch = min(len(pending), ANSWERS_AT_ONCE)
        done, pending = ray.wait(pending, num_returns=batch, timeout=left)
        for ref in done:  # as they come: each answer reduced to its group, then dropped
            n = calls.pop(ref)
            answers.append((*_answer(ref, n, keys, judge), n["NodeID"]))
    for ref in pending:
        ray.cancel(ref, force=True)
        n = calls.pop(ref)
        fallback = view.failed(_fallback_name(n), f"no answer within {timeout_s:g} s")
        answers.append((fallback.name, None, fallback, n["NodeID"]))
    gathered = group.Gather()
    seen = Counter(name for name, *_ in answers)
    for name, keyed, node, node_id in answers:
        # Names made unique: several nodes on one host (or two snapshots of one name) get the
        # first characters of their Ray node id appended.
        unique = f"{name}#{node_id[:8]}" if seen[name] > 1 else name
        if keyed is None:
            gathered.fail(replace(node, name=unique))
        else:
            gathered.add(keyed, unique, node)
    return gathered.report()


def _answer(
    ref: Any, n: dict[str, Any], keys: key.Keys, judge: Judge
) -> tuple[str, key.Keyed | None, view.NodeView]:
    """One node's answer as (name, its group or None when not judged, the view it got)."""
    fallback = _fallback_name(n)
    try:
        answer = ray.get(ref)
    except Exception as exc:  # a task that died: its error, in one line, for this node
        text = str(exc).strip().splitlines()
        return fallback, None, view.failed(fallback, text[-1] if text else type(exc).__name__)
    if "view" in answer:
        node = view.NodeView.from_dict(answer["view"])
        if node.error is not None or not node.facts:
            return node.name, None, node
        data, name = node.facts, node.name
    else:
        node, data, name = None, answer["facts"], str(answer["name"])
    try:
        keyed = keys.of(data, f"node {name}")
    except facts.FactsError as exc:  # facts this fp4doctor cannot read (a newer node's)
        return name, None, view.failed(name, str(exc))
    if node is None:
        return name, keyed, judge(keyed, name)
    return name, keyed, replace(node, facts=keyed.data)  # the group's facts, held once


def _fallback_name(n: dict[str, Any]) -> str:
    return str(n.get("NodeManagerHostname") or n["NodeID"][:8])
