"""One log line as the engine wrote it: the prefixes that the container runtime, the process
manager and the engine's logger put before it taken off, and who wrote it (the process or rank,
so that interleaved tracebacks of several ranks are followed apart).

Prefixes taken off, in any order and number, at the start of the line:
- ANSI colour and cursor codes, anywhere in the line (vLLM and SGLang colour their levels);
- `docker logs -t` / `kubectl logs --timestamps`: ``2026-01-01T00:00:00.123456789Z``;
- `kubectl logs --prefix`: ``[pod/NAME/CONTAINER]``;
- vLLM's process tags: ``(EngineCore pid=12)``, ``(EngineCore_DP0 pid=12)``,
  ``(VllmWorker TP0 pid=12)``, ``(Worker_TP1_EP1 pid=12)``, ``(APIServer pid=1)``, Ray's
  ``(RayWorkerWrapper pid=12, ip=10.0.0.1)`` (vllm/utils/system_utils.py `_add_prefix`);
- torch.distributed's ``[rank0]:``;
- SGLang's ``[2026-01-01 00:00:00 TP0]``, ``[2026-01-01 00:00:00 DP0 TP1 EP1]``, ``[TP0]``,
  ``[2026-01-01 00:00:00]`` (sglang/srt/utils: the logger's ``[%(asctime)s%(prefix)s]``);
- TensorRT-LLM's ``[03/10/2025-10:49:53]``;
- Ray actors' ``(WorkerDict(rank=54 pod=x) pid=384, ip=10.0.0.1)``;
- vLLM's logger header ``INFO 12-03 12:45:22 [file.py:85]`` (and the older ``file.py:85]``),
  whose level is kept: it tells a WARNING-level log from one that names no kernel.

Every pattern is anchored at the start of what is left and its repetitions are bounded, so a
line of any length costs time linear in its length.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_ANSI = re.compile(r"\x1b\[[0-9;?]{0,32}[ -/]{0,4}[@-~]|\x1b\][^\x07\x1b]{0,256}(?:\x07|\x1b\\)")
_OUTER = re.compile(
    r"(?:"
    r"(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?:Z|[+-]\d\d:?\d\d)?)\s?"
    r"|\[(?P<pod>pod/[^\]\s]{1,300})\]\s?"
    r"|\((?P<proc>[\w.:-]{1,64}(?: [\w.:-]{1,64}){0,4}) pid=(?P<pid>\d{1,10})"
    r"(?:, ip=[\w.:]{1,64})?\)\s?"
    r"|\[(?P<rank>rank\d{1,6})\]:\s?"
    r"|\[(?:\d\d/\d\d/\d{4}-\d\d:\d\d:\d\d)\]\s?"  # TensorRT-LLM's [03/10/2025-10:49:53]
    r"|\((?P<wd>WorkerDict\([^()]{1,300}\)) pid=\d{1,10}(?:, ip=[\w.:]{1,64})?\)\s?"  # Ray actors
    r"|\[(?:\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d{1,6})?)?\s?"
    r"(?P<par>(?:[A-Z]{2,4}\d{1,5}\s?){0,6})\]\s?"
    r")"
)
_LEVEL = re.compile(
    r"(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s{1,4}"
    r"(?:\d\d-\d\d\s\d\d:\d\d:\d\d(?:[.,]\d{1,6})?\s{1,4})?"
    r"(?:\[[\w./<>-]{1,200}:\d{1,7}\]|[\w./<>-]{1,200}:\d{1,7}\])\s?"
)
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


@dataclass(frozen=True)
class Line:
    """A log line without its prefixes."""

    number: int  # as `grep -n` counts (\\n only)
    text: str  # what the engine wrote, without the prefixes (and without a trailing \\r)
    source: str  # who wrote it: the process or rank tags, "" when none ("" for one process)
    level: str | None  # the engine logger's level where the line carries one (vLLM)

    @property
    def rank(self) -> str:
        return self.source or "main"


def decode(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")


def parse(number: int, text: str) -> Line:
    """`text` (one line, decoded) without its prefixes."""
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    text = text.rstrip("\r")
    if "\r" in text:  # a progress bar redrawn in place: what stays on screen is the last part
        text = text.replace("\r", " ")
    source: list[str] = []
    pos = 0
    for _ in range(8):
        m = _OUTER.match(text, pos)
        if m is None or m.end() == pos:
            break
        if m["proc"]:
            source.append(f"{m['proc']} pid={m['pid']}")
        elif m["rank"]:
            source.append(m["rank"])
        elif m["par"] and m["par"].strip():
            source.append(m["par"].strip())
        elif m["pod"]:
            source.append(m["pod"])
        elif m["wd"]:
            source.append(m["wd"])
        pos = m.end()
    level = None
    m = _LEVEL.match(text, pos)
    if m is not None:
        level = "WARNING" if m["level"] == "WARN" else m["level"]
        pos = m.end()
    return Line(number, text[pos:], " ".join(source), level)
