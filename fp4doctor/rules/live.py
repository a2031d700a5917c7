"""Fold live smoke results into the static verdicts, and say where rules and reality disagree.

Pure: takes `SmokeResult`s (from fp4doctor.smoke) and changes only findings.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fp4doctor.findings import Finding, Status, apply_ignores
from fp4doctor.rules import Evaluation

_STATUS = {"pass": Status.PASS, "fail": Status.FAIL, "error": Status.ERROR, "skip": Status.SKIP}


def adapters_to_run(evaluation: Evaluation, force: bool) -> list[str]:
    """Smoke adapters of the backends the rules call valid (all backends with --force)."""
    names: list[str] = []
    for name, verdict in evaluation.verdicts.items():
        if verdict.valid or force:
            names.extend(a for a in evaluation.profile.backends[name].smoke if a not in names)
    return names


def smoke_id(backend: str | None, adapter: str, where: str) -> str:
    if backend is None or backend == adapter:
        return f"smoke.{adapter}.{where}"
    return f"smoke.{backend}.{adapter}.{where}"


def merge(evaluation: Evaluation, results: Sequence[Any]) -> None:
    """Attach each result to the backends that use its adapter; a failed live GEMM makes the
    backend invalid; static/live disagreements get their own findings."""
    static_valid = {name: v.valid for name, v in evaluation.verdicts.items()}
    for result in results:
        where = f"gpu{result.gpu}" if result.gpu is not None else "cpu"
        owners = [
            name for name, b in evaluation.profile.backends.items() if result.adapter in b.smoke
        ]
        details = {
            k: v
            for k, v in result.to_dict().items()
            if v is not None and k not in ("adapter", "status", "reason", "gpu")
        }
        if not owners or result.gpu is None:
            # The CPU run exercises fp4doctor's own pipeline, not an engine backend.
            evaluation.smoke.extend(
                apply_ignores(
                    [
                        Finding(
                            smoke_id(None, result.adapter, where),
                            _STATUS[result.status],
                            f"{result.adapter} on {result.device}: {result.reason}",
                            details=details,
                        )
                    ],
                    evaluation.ignore,
                )
            )
            continue
        for name in owners:
            verdict = evaluation.verdicts[name]
            status = _STATUS[result.status]
            verdict.findings.extend(
                apply_ignores(
                    [
                        Finding(
                            smoke_id(name, result.adapter, where),
                            status,
                            f"live {result.adapter} GEMM on {result.device}: {result.reason}",
                            gpu=result.gpu,
                            backend=name,
                            details=details,
                        )
                    ],
                    evaluation.ignore,
                )
            )
            agreement = _agreement(name, result, static_valid[name], where)
            if agreement is not None:
                verdict.findings.append(agreement)


def _agreement(name: str, result: Any, rules_valid: bool, where: str) -> Finding | None:
    fid = f"agree.{name}.{result.adapter}.{where}"
    if result.status == "skip":
        return None
    if result.status == "error":  # a crash, a timeout, out of memory: no verdict on the kernel
        return Finding(
            fid,
            Status.SKIP,
            f"no live verdict to compare with the rules on {result.device}: {result.reason}",
            gpu=result.gpu,
            backend=name,
        )
    live_ok = result.status == "pass"
    if rules_valid and not live_ok:
        return Finding(
            fid,
            Status.WARN,
            f"rules and reality disagree: the rules call {name} valid on {result.device}, but "
            f"its live GEMM failed ({result.reason}); the profile is missing a rule",
            fix="report it with `fp4doctor check --json` output",
            gpu=result.gpu,
            backend=name,
        )
    if not rules_valid and live_ok:
        return Finding(
            fid,
            Status.WARN,
            f"rules and reality disagree: the rules reject {name} on {result.device}, but its "
            "live GEMM passed: a rule may be stale (the engine may still refuse it)",
            fix="report it with `fp4doctor check --force --json` output",
            gpu=result.gpu,
            backend=name,
        )
    verdict = "both accept it" if live_ok else "both refuse it"
    return Finding(
        fid,
        Status.PASS,
        f"rules and the live result agree on {result.device}: {verdict}",
        gpu=result.gpu,
        backend=name,
    )
