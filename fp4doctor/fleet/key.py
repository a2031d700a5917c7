"""What makes two snapshots one group: the group key, and the way to it that skips the work.

The key is the facts exactly as the fleet judges and shows them, nothing named by hand but what
says when a snapshot was taken: the snapshot checked against the facts model
(`facts.from_dict`), redacted (`facts.redact`: no hostname, GPU UUIDs, home directories or user
names, in any field), with `CAPTURE` (when, and by which fp4doctor) at its defaults. Each group
is judged on exactly those facts (`Keyed.facts`), so its verdict cannot depend on anything the
key leaves out, and every other field, one added to the facts model later included, is in the
key without being listed here (`synthetic` too: the rules read it).

Checking and redacting cost about a millisecond a snapshot; most of a fleet is copies of a few
snapshots. So a snapshot is first hashed as parsed, without `CAPTURE` and its hostname: two
snapshots of one hash redact alike, since the hostname (and its first label) is the only other
difference and, checked here, is in no other string (redaction replaces it in every string; a
snapshot that has it elsewhere takes the long way). A hash seen before gives its key at once,
its hostname and `CAPTURE` values still checked against the facts model; a new one is checked
and redacted whole.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from typing import Any

from fp4doctor import facts as F

CAPTURE = ("captured_at", "fp4doctor_version")
NAME = "hostname"  # redaction blanks it and replaces it in every string
_DEFAULTS: dict[str, Any] = {
    f.name: f.default for f in dataclasses.fields(F.HostFacts) if f.name in CAPTURE
}
_ESCAPED = frozenset("\\'\"")  # what repr escapes among printable characters
_SHORTCUTS = 4096  # hashes remembered (a cache: forgetting costs only time)


@dataclass(frozen=True)
class Keyed:
    """A snapshot's group: its key and the facts the group is judged on and shows."""

    key: str  # canonical JSON of `data`
    facts: F.HostFacts
    data: dict[str, Any]  # F.to_dict(facts), as a node view carries it


def canonical(data: Any) -> str:
    """One text per JSON value, whatever the order of its keys."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


class Keys:
    """Snapshots to their group keys, one `Keyed` per distinct key (its facts shared by every
    snapshot of it): memory grows with the groups, not the snapshots."""

    def __init__(self) -> None:
        self._by_key: dict[str, Keyed] = {}
        self._by_hash: dict[bytes, Keyed] = {}

    def __len__(self) -> int:
        return len(self._by_key)

    def of(self, data: Any, source: str) -> Keyed:
        """The group of one parsed snapshot (`facts.read`, or a node's facts as data). Raises
        FactsError, naming `source`, for a snapshot the facts model refuses."""
        shortcut = _hash(data)
        found = self._by_hash.get(shortcut) if shortcut is not None else None
        if found is not None:
            # The rest is the found snapshot's, already checked: check what the hash left out.
            F.check_fields(data, (*CAPTURE, NAME), source)
            return found
        host = F.from_dict(data, source)
        shown = dataclasses.replace(F.redact(host), **_DEFAULTS)
        as_data = F.to_dict(shown)
        key = canonical(as_data)
        keyed = self._by_key.setdefault(key, Keyed(key, shown, as_data))
        if shortcut is not None:
            if len(self._by_hash) >= _SHORTCUTS:
                self._by_hash.clear()
            self._by_hash[shortcut] = keyed
        return keyed


def _hash(data: Any) -> bytes | None:
    """The hash of a snapshot without `CAPTURE` and its hostname, or None where two snapshots
    of one hash might not redact alike (the hostname may be in another value) or the data is
    not a snapshot's shape (the facts model then says what is wrong)."""
    if not isinstance(data, dict) or "schema_version" not in data:
        return None
    name = data.get(NAME)
    if name is not None and not isinstance(name, str):
        return None
    # `repr`, not the canonical JSON: a third faster, and as exact (the keys' order is part of
    # it: snapshots from one probe share it; another order only costs the long way).
    try:
        text = repr({k: v for k, v in data.items() if k not in CAPTURE and k != NAME})
    except RecursionError:
        return None
    if name:
        # A value holding the name holds it verbatim in `text` where repr escapes none of its
        # characters (else: the long way); a hit in a key only costs the long way too.
        needles = {n for n in (name, name.split(".")[0]) if n}
        if any(not n.isprintable() or _ESCAPED & set(n) or n in text for n in needles):
            return None
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
