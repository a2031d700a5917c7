"""The fleet report as people read it, and as a versioned JSON document (like `check`)."""

from __future__ import annotations

from typing import Any

from fp4doctor import __version__
from fp4doctor.findings import Status
from fp4doctor.fleet.group import FleetReport, Group
from fp4doctor.render import Style
from fp4doctor.terminal import clean

FLEET_SCHEMA_VERSION = 1
_MARK = {"ready": Status.PASS, "not ready": Status.FAIL, "no verdict": Status.WARN}


def count(n: int, noun: str) -> str:
    """`n` and `noun`, plural unless `n` is 1: "1 node", "3 nodes", "0 outliers"."""
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _env(g: Group) -> dict[str, Any]:
    n = g.typical
    return {"set": dict(n.env_set), "unset": list(n.env_unset)}


def _env_text(g: Group) -> str:
    n = g.typical
    parts = [f"{k}={v}" for k, v in n.env_set]
    if n.env_unset:
        parts.append("unset " + " ".join(n.env_unset))
    return "; ".join(parts) if parts else "nothing to set"


def document(report: FleetReport) -> dict[str, Any]:
    """The JSON document: every group with its nodes, facts summary, verdict and env; the
    outliers with each difference; the per-family counts; the nodes that could not be judged."""
    return {
        "schema_version": FLEET_SCHEMA_VERSION,
        "fp4doctor_version": __version__,
        "outcome": report.outcome,
        "exit_code": report.exit_code,
        "nodes": report.size,
        "families": report.families,
        "cold_start": report.cold_start,
        "groups": [
            {
                "id": g.id,
                "nodes": g.names,
                "gpus": g.typical.gpus,
                "target": g.typical.target,
                "engine": g.typical.engine,
                "outcome": g.typical.outcome,
                "chosen": g.typical.chosen,
                "families": {
                    k: {"outcome": f.outcome, "chosen": f.chosen}
                    for k, f in g.typical.families.items()
                },
                "valid_backends": [b for b, ok in g.typical.backends.items() if ok],
                "env": _env(g),
                "blocking": list(g.typical.blocking),
                "facts": g.typical.facts,
            }
            for g in report.groups
        ],
        "outliers": [
            {
                "node": o.node,
                "group": o.group,
                "baseline": o.baseline,
                "baseline_nodes": o.baseline_nodes,
                "differences": [
                    {"kind": d.kind, "what": d.what, "node": d.node, "peers": d.peers}
                    for d in o.differences
                ],
                "verdict": o.verdict,
                "reason": o.reason,
            }
            for o in report.outliers
        ],
        "failed": [{"node": n.name, "error": n.error} for n in report.failed],
        "notes": list(report.notes),
    }


def human(report: FleetReport, *, style: Style) -> str:
    """Groups (largest first) with their verdict and env, then the outliers and the failures."""
    out = [
        style.bold(
            f"fp4doctor {__version__} · fleet · {count(report.size, 'node')} in "
            f"{count(len(report.groups), 'group')}"
        )
    ]
    for family, counts in report.families.items():
        shown = ", ".join(f"{n} {o}" for o, n in counts.items() if n)
        cold = ", ".join(
            f"{n} {what}" for what, n in report.cold_start.get(family, {}).items() if n
        )
        out.append(f"  {family}: {shown}" + (f"; first start: {cold}" if cold else ""))
    for note in report.notes:
        out.append(clean(f"  note: {note}"))
    out += ["", style.bold("Groups")]
    for g in report.groups:
        n = g.typical
        mark = style.mark(_MARK.get(n.outcome, Status.ERROR))
        size = count(g.size, "node")
        out.append(f"  {mark} " + clean(f"{g.id}  {size}  {n.gpus}  {n.engine or ''}"))
        verdicts = " · ".join(
            f"{name}: {f.outcome}" + (f" ({f.chosen})" if f.chosen else "")
            for name, f in n.families.items()
        )
        out.append(clean(f"      {verdicts or n.outcome}"))
        if n.env_set or n.env_unset:
            out.append(clean(f"      env: {_env_text(g)}"))
        if n.blocking:
            more = f" (and {len(n.blocking) - 1} more)" if len(n.blocking) > 1 else ""
            out.append(clean(f"      blocking: {n.blocking[0]}{more}"))
        out.append(clean(f"      nodes: {', '.join(g.names)}"))
    if report.outliers:
        out += ["", style.bold("Outliers")]
        for o in report.outliers:
            mark = style.mark(Status.WARN)
            out.append(f"  {mark} " + clean(f"{o.node} ({o.group}, vs {o.baseline}): {o.reason}"))
    if report.failed:
        out += ["", style.bold("Not judged")]
        for f in report.failed:
            out.append(f"  {style.mark(Status.ERROR)} " + clean(f"{f.name}: {f.error}"))
    verdict = {"ready": "READY", "not ready": "NOT READY", "no verdict": "NO VERDICT"}[
        report.outcome
    ]
    out += [
        "",
        style.bold(
            f"{verdict}: {report.ready} of {count(report.judged, 'judged node')} ready, "
            f"{count(len(report.outliers), 'outlier')}, {len(report.failed)} not judged"
        ),
    ]
    return "\n".join(out) + "\n"
