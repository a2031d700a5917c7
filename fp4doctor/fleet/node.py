"""`fp4doctor node`: the check on this node, written where the cluster's own agents read it.

- an NFD local feature file (labels: readiness, the backend chosen per family, each valid
  backend; with an expiry, so that labels vanish when the agent stops): `labels.py`;
- a Prometheus textfile for node-exporter: `metrics.py`;
- a ready file: written when the node is ready, removed when it is not (a probe or an init
  container can test for it);
each written atomically (`fp4doctor.atomic.write_atomic`), so that NFD and node-exporter never
read half a file.

The exit code is the one a node-problem-detector custom plugin understands
(kubernetes/node-problem-detector, `pkg/custompluginmonitor/types/types.go`: OK 0, NonOK 1,
Unknown 2; `pkg/custompluginmonitor/plugin/plugin.go` reads any other code as Unknown), and the
one line on stdout is the condition message NPD shows (it keeps `max_output_length`, 80 bytes by
default). fp4doctor's own codes map as:

    fp4doctor 0 ready                         -> 0 OK
    fp4doctor 1 not ready                     -> 1 NonOK
    fp4doctor 3 no verdict                    -> 2 Unknown
    fp4doctor 2 usage or profile error        -> 2 Unknown (already)
    fp4doctor 4 an output could not be written -> 2 Unknown
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING

from fp4doctor.atomic import write_atomic
from fp4doctor.fleet import labels, metrics
from fp4doctor.fleet.view import NodeView

if TYPE_CHECKING:
    from fp4doctor.doctor import Progress, Question

NPD_OK, NPD_NON_OK, NPD_UNKNOWN = 0, 1, 2
NPD_MESSAGE_BYTES = 80  # NPD's default max_output_length
OUTCOME_LABELS = {"ready": "ready", "not ready": "not-ready", "no verdict": "no-verdict"}


def npd_exit_code(fp4doctor_code: int) -> int:
    """fp4doctor's exit code as node-problem-detector's plugin status (see the module doc)."""
    return {0: NPD_OK, 1: NPD_NON_OK}.get(fp4doctor_code, NPD_UNKNOWN)


@dataclass(frozen=True)
class Outputs:
    """Where to write; None: not written."""

    features: str | None = None
    textfile: str | None = None
    ready: str | None = None
    namespace: str = labels.FP4DOCTOR_NAMESPACE
    expiry: timedelta = timedelta(hours=1)


def node_labels(node: NodeView, namespace: str) -> dict[str, str]:
    """The node's labels: readiness and outcome, the engine, the backend chosen per family, and
    one label per backend valid here (`fp4doctor.io/backend.flashinfer-cudnn=true`), so that a
    pod can ask for a node where its backend works."""

    def k(name: str) -> str:
        return labels.key(namespace, name)

    out = {
        k("ready"): "true" if node.ready else "false",
        k("outcome"): OUTCOME_LABELS.get(node.outcome, labels.value(node.outcome)),
        k("version"): labels.value(node.fp4doctor_version),
    }
    if node.target:
        out[k("target")] = labels.value(node.target)
    if node.engine_version:
        out[k("engine-version")] = labels.value(node.engine_version)
    for family, verdict in node.families.items():
        name = labels.value(family)
        out[k(f"{name}.ready")] = "true" if verdict.outcome == "ready" else "false"
        if verdict.chosen:
            out[k(f"{name}.backend")] = labels.value(verdict.chosen)
        # The first start-up: will it compile or autotune (fp4doctor/coldstart)?
        for what, state in (("jit", verdict.jit), ("autotune", verdict.autotune)):
            if state:
                out[k(f"{name}.{what}")] = labels.value(state)
    for backend, ok in node.backends.items():
        if ok:
            out[k(f"backend.{labels.value(backend)}")] = "true"
    return out


def message(node: NodeView) -> str:
    """One line for NPD's condition message, at most 80 bytes."""
    if node.ready:
        text = f"NVFP4 ready: {node.engine} uses {node.chosen or 'its own pick'}"
    elif node.outcome == "no verdict":
        text = "NVFP4 no verdict: " + (node.blocking[0] if node.blocking else "facts unreadable")
    else:
        text = "NVFP4 not ready: " + (node.blocking[0] if node.blocking else "no valid backend")
    text = " ".join(text.split())
    encoded = text.encode("utf-8")
    if len(encoded) <= NPD_MESSAGE_BYTES:
        return text
    return encoded[: NPD_MESSAGE_BYTES - 3].decode("utf-8", "ignore") + "..."


def write(node: NodeView, outputs: Outputs, *, now: datetime | None = None) -> list[str]:
    """Write the outputs asked for, each atomically; the paths written (a removed ready file
    included). Raises OSError (with the path as `filename`) for a file that cannot be written."""
    moment = now or datetime.now(timezone.utc)
    done: list[str] = []
    if outputs.features:
        text = labels.feature_file(
            node_labels(node, outputs.namespace),
            expires=moment + outputs.expiry,
            comment=f"fp4doctor {node.fp4doctor_version} node check, {labels.rfc3339(moment)}: "
            f"{message(node)}",
        )
        write_atomic(outputs.features, text, overwrite=True)
        done.append(outputs.features)
    if outputs.textfile:
        write_atomic(
            outputs.textfile, metrics.textfile(node, now=moment.timestamp()), overwrite=True
        )
        done.append(outputs.textfile)
    if outputs.ready:
        if node.ready:
            write_atomic(outputs.ready, message(node) + "\n", overwrite=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(outputs.ready)
        done.append(outputs.ready)
    return done


def run_check(
    question: Question, name: str | None = None, progress: Progress | None = None
) -> NodeView:
    """Run the doctor core on this node (or its facts snapshot) and view the report; `name`
    defaults to the hostname. Raises what `diagnose` raises."""
    from fp4doctor.doctor import diagnose
    from fp4doctor.fleet.view import of

    return of(name or os.uname().nodename, diagnose(question, progress=progress))
