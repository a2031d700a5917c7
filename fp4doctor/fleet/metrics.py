"""One node's check as Prometheus text exposition, for node-exporter's textfile collector.

node-exporter reads every `*.prom` file in `--collector.textfile.directory` on each scrape
(prometheus/node_exporter, README "Textfile Collector"); its README asks writers to write a
temporary file and rename it, which `fp4doctor.atomic` does (the temporary name does not end in
`.prom`). The format: `# HELP` and `# TYPE` lines, then `name{label="value"} number`; in label
values a backslash, a double quote and a newline are escaped, in HELP text a backslash and a
newline (https://prometheus.io/docs/instrumenting/exposition_formats/#text-based-format).
The tests parse the output with `prometheus_client.parser`, the consumer's own reader.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from fp4doctor.coldstart.verdict import AUTOTUNE_STATES, JIT_STATES
from fp4doctor.fleet.view import NodeView

PREFIX = "fp4doctor"
OUTCOMES = ("ready", "not ready", "no verdict")


def _label_value(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _sample(name: str, labels: Mapping[str, str | None], number: float) -> str:
    inner = ",".join(f'{k}="{_label_value(v or "")}"' for k, v in labels.items())
    shown = repr(float(number)) if not float(number).is_integer() else str(int(number))
    return f"{name}{{{inner}}} {shown}" if inner else f"{name} {shown}"


def _family(name: str, help_text: str, samples: Iterable[str]) -> list[str]:
    return [f"# HELP {name} {_help(help_text)}", f"# TYPE {name} gauge", *samples]


def textfile(node: NodeView, *, now: float) -> str:
    """The gauges of one node: readiness, the outcome, each FP4 GEMM family, each backend's
    validity and the choice, and when the check ran; fp4doctor's version as a label."""
    base = {"target": node.target, "engine_version": node.engine_version}
    out: list[str] = []
    out += _family(
        f"{PREFIX}_ready",
        "1 when a valid NVFP4 GEMM path exists on this node and the environment as set does not "
        "break it (fp4doctor check exit code 0), else 0.",
        [_sample(f"{PREFIX}_ready", {**base, "version": node.fp4doctor_version}, node.ready)],
    )
    out += _family(
        f"{PREFIX}_outcome",
        "1 for the outcome of the last check (ready, not ready, no verdict), 0 for the others.",
        [_sample(f"{PREFIX}_outcome", {**base, "outcome": o}, node.outcome == o) for o in OUTCOMES],
    )
    out += _family(
        f"{PREFIX}_family_ready",
        "1 when this FP4 GEMM family (linear, moe) has a valid path on this node, else 0.",
        [
            _sample(f"{PREFIX}_family_ready", {**base, "family": name}, fam.outcome == "ready")
            for name, fam in node.families.items()
        ],
    )
    out += _family(
        f"{PREFIX}_backend_valid",
        "1 when this FP4 GEMM backend is valid on every GPU of this node, else 0.",
        [
            _sample(
                f"{PREFIX}_backend_valid",
                {**base, "backend": b, "native": "true" if node.native.get(b) else "false"},
                ok,
            )
            for b, ok in node.backends.items()
        ],
    )
    out += _family(
        f"{PREFIX}_backend_chosen",
        "1 for the backend fp4doctor chose for this FP4 GEMM family on this node.",
        [
            _sample(f"{PREFIX}_backend_chosen", {**base, "family": name, "backend": fam.chosen}, 1)
            for name, fam in node.families.items()
            if fam.chosen
        ],
    )
    for what, states in (("jit", JIT_STATES), ("autotune", AUTOTUNE_STATES)):
        metric = f"{PREFIX}_cold_start_{what}"
        out += _family(
            metric,
            f"1 for the {what} state of the chosen backend's first start-up in this FP4 GEMM "
            "family (fp4doctor/coldstart), 0 for the others.",
            [
                _sample(metric, {**base, "family": name, "state": s}, getattr(fam, what) == s)
                for name, fam in node.families.items()
                if getattr(fam, what)
                for s in states
            ],
        )
    out += _family(
        f"{PREFIX}_info",
        "Always 1: the fp4doctor version and the engine judged, as labels.",
        [
            _sample(
                f"{PREFIX}_info",
                {**base, "version": node.fp4doctor_version, "engine": node.engine},
                1,
            )
        ],
    )
    out += _family(
        f"{PREFIX}_last_run_timestamp_seconds",
        "When the check that wrote this file ran, in seconds since the epoch.",
        [_sample(f"{PREFIX}_last_run_timestamp_seconds", {}, round(now, 3))],
    )
    return "\n".join(out) + "\n"
