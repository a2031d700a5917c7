"""Kubernetes label syntax, and the Node Feature Discovery (NFD) local feature file.

NFD's `local` feature source reads every file in `/etc/kubernetes/node-feature-discovery/
features.d/` on the node, one `name=value` per line, and nfd-master turns each into a node label
(kubernetes-sigs/node-feature-discovery, `source/local/local.go`; docs: "Local feature source",
https://kubernetes-sigs.github.io/node-feature-discovery/stable/usage/customization-guide.html):

- a line `# +expiry-time=<RFC 3339>` drops the lines after it once that time has passed (parsed
  with Go's `time.Parse(time.RFC3339, ...)`), so that labels vanish when the node agent stops;
- other `#` lines are comments; a file whose name starts with `.` is ignored, which is what makes
  a write to a hidden temporary name and a rename atomic for NFD (`fp4doctor.atomic` writes
  `.NAME.<hex>.tmp`); a file over 65,536 bytes is refused (`MaxFeatureFileSize`).

A label must also pass the API server's validation, or nfd-master refuses the whole update
(nfd-master validates names and values since v0.13.x, kubernetes-sigs/node-feature-discovery
PR #1228): a name is an optional DNS-subdomain prefix and `/`, then at most 63 characters of
`[A-Za-z0-9._-]` that begin and end alphanumeric; a value at most 63 characters of the same set,
alphanumeric at both ends, or empty (https://kubernetes.io/docs/concepts/overview/working-with-
objects/labels/#syntax-and-character-set; `k8s.io/apimachinery/pkg/util/validation`,
`IsQualifiedName`, `IsValidLabelValue`).

nfd-master allows labels in every namespace but `kubernetes.io` and its sub-namespaces, except
`feature.node.kubernetes.io` and `profile.node.kubernetes.io`, which are always allowed (nfd-master
configuration reference, `denyLabelNs`, v0.13 and later). Older nfd-master releases allowed only
`feature.node.kubernetes.io` unless `-extra-label-ns` named more: `--label-namespace
feature.node.kubernetes.io` writes labels that any release accepts.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime, timezone

FP4DOCTOR_NAMESPACE = "fp4doctor.io"
NFD_NAMESPACE = "feature.node.kubernetes.io"
NAMESPACES = (FP4DOCTOR_NAMESPACE, NFD_NAMESPACE)
MAX_FEATURE_FILE_BYTES = 65536  # NFD's MaxFeatureFileSize

_NAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?")
_VALUE = re.compile(r"([A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?)?")
_PREFIX = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_NOT_ALLOWED = re.compile(r"[^A-Za-z0-9._-]+")


def valid_key(key: str) -> bool:
    """A qualified label name: `[prefix/]name` (apimachinery `IsQualifiedName`)."""
    prefix, slash, name = key.rpartition("/")
    if slash and not (0 < len(prefix) <= 253 and _PREFIX.fullmatch(prefix)):
        return False
    return bool(_NAME.fullmatch(name))


def valid_value(value: str) -> bool:
    """A label value (apimachinery `IsValidLabelValue`): empty, or up to 63 characters."""
    return bool(_VALUE.fullmatch(value))


def value(text: object) -> str:
    """Any text as a valid label value: runs of other characters become `_`, the ends are cut
    to alphanumerics, and the result to 63 characters (`0.11.0+cu128` -> `0.11.0_cu128`)."""
    out = _NOT_ALLOWED.sub("_", str(text))[:63]
    return re.sub(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$", "", out)


def key(namespace: str, name: str) -> str:
    """The label name for `name` in `namespace`: `fp4doctor.io/ready`, or in NFD's own namespace
    `feature.node.kubernetes.io/fp4doctor-ready` (so that it does not clash with other sources)."""
    if namespace not in NAMESPACES:
        raise ValueError(f"unknown label namespace {namespace!r} (valid: {', '.join(NAMESPACES)})")
    full = (
        f"{namespace}/{name}"
        if namespace == FP4DOCTOR_NAMESPACE
        else f"{namespace}/fp4doctor-{name}"
    )
    if not valid_key(full):
        raise ValueError(f"{full!r} is not a valid Kubernetes label name")
    return full


def rfc3339(moment: datetime) -> str:
    """UTC, whole seconds, `Z`: what Go's `time.RFC3339` layout parses."""
    return moment.astimezone(timezone.utc).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


def feature_file(labels: Mapping[str, str], *, expires: datetime, comment: str) -> str:
    """An NFD local feature file: a comment, the expiry directive, then `name=value` lines.

    Raises ValueError for a label NFD or the API server would refuse, rather than write a file
    that nfd-master rejects as a whole."""
    lines = [f"# {line}" for line in comment.splitlines()]
    lines.append(f"# +expiry-time={rfc3339(expires)}")
    for k, v in labels.items():
        if not valid_key(k):
            raise ValueError(f"{k!r} is not a valid Kubernetes label name")
        if not valid_value(v):
            raise ValueError(f"label {k}: {v!r} is not a valid label value")
        lines.append(f"{k}={v}")
    text = "\n".join(lines) + "\n"
    if len(text.encode("utf-8")) > MAX_FEATURE_FILE_BYTES:
        raise ValueError(f"the feature file would exceed NFD's {MAX_FEATURE_FILE_BYTES} bytes")
    return text
