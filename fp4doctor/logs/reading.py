"""What a log says, gathered line by line (`Reading.feed`), so that a file, stdin and a log
still being written (`--follow`) are read by the same code with memory bounded by the number of
distinct causes, not of lines."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from fp4doctor.logs import failures as fl
from fp4doctor.logs import layers, signatures
from fp4doctor.logs.lines import Line, decode, parse
from fp4doctor.logs.source import Tally
from fp4doctor.oracle import startup_log

MAX_CAUSES = 200  # distinct causes kept; more are counted in `Reading.causes_dropped`
# The engine's own version, where its start-up log prints it (vLLM: vllm/entrypoints/openai/
# api_server.py "vLLM API server version %s"; vllm/v1/engine/core.py "Initializing a V1 LLM
# engine (v%s) with config").
_V = r"(\d{1,4}(?:\.[\w+]{1,20}){1,5})"
_VLLM_VERSION = (
    ("vLLM API server version ", re.compile(r"vLLM API server version v?" + _V)),
    ("LLM engine (v", re.compile(r"LLM engine \(v" + _V + r"\)")),
)
# Lines that tell a log is an engine's, and whose.
_STARTED = ("Application startup complete", "The server is fired up and ready to roll")


@dataclass
class Reading:
    known: tuple[signatures.Signature, ...] = ()
    tally: Tally = field(default_factory=Tally)
    ran: list[startup_log.Ran] = field(default_factory=list)
    causes: dict[str, fl.Failure] = field(default_factory=dict)
    causes_dropped: int = 0
    levels: dict[str, int] = field(default_factory=dict)
    vllm_lines: int = 0  # lines with vLLM's logger header
    sglang_lines: int = 0  # lines SGLang's logger wrote (server_args, its [ts TPn] prefix)
    text_lines: int = 0  # non-empty lines
    engine_version: str | None = None  # vLLM's, where the log prints it
    started: int | None = None  # the line the server said it is up
    tree: layers.Tree | None = None  # vLLM's module tree (VLLM_LOG_MODEL_INSPECTION=1)
    refused: list[tuple[str, str]] = field(default_factory=list)  # MoE backends passed over
    sglang: dict[str, str] = field(default_factory=dict)  # SGLang's resolved arguments read
    _tree_source: str = ""
    _ran_seen: set[tuple[str, str, str]] = field(default_factory=set)
    _tracker: fl.Tracker = field(default_factory=fl.Tracker)

    def feed_raw(self, number: int, raw: bytes) -> None:
        if b"\0" in raw:
            self.tally.binary += 1
            return
        self.feed(parse(number, decode(raw)))

    def feed(self, line: Line) -> None:
        text = line.text
        if not text.strip():
            return
        self.text_lines += 1
        if line.level is not None:
            self.vllm_lines += 1
            self.levels[line.level] = self.levels.get(line.level, 0) + 1
        if self.engine_version is None and ("vLLM" in text or "LLM engine (v" in text):
            for guard, pattern in _VLLM_VERSION:
                if guard in text and (m := pattern.search(text)):
                    self.engine_version = m.group(1)
        if self.started is None and any(s in text for s in _STARTED):
            self.started = line.number
        found = startup_log.kernels(text, line.number)
        if found and found[0].engine == "sglang":
            self.sglang_lines += 1
            self.sglang.update(startup_log.sglang_args(text))
        for r in found:  # each kernel once (a line repeated a million times is one)
            if (r.engine, r.family, r.engine_name) not in self._ran_seen:
                self._ran_seen.add((r.engine, r.family, r.engine_name))
                self.ran.append(r)
        if self.tree is not None and not self.tree.done and line.source == self._tree_source:
            self.tree.feed(text, line.number)
            return
        if layers.HEADER in text:
            self.tree, self._tree_source = layers.Tree(line.number), line.source
            return
        refused = layers.refusal(text) if line.level == "DEBUG" else None
        if refused is not None and refused not in self.refused:
            self.refused.append(refused)
        if line.level in ("DEBUG", "INFO"):
            return  # what the engine logged as information is no error of its own
        cls, name, frame = self._tracker.classify(line)
        # Every line is tried (a message's second line, SGLang's assertion text): the guards
        # are literals, so this costs a substring test per signature.
        known = [] if fl.is_noise(text) else signatures.matching(text, self.known)
        if known:  # named after its class of cause where one matches (advisories are judged later)
            cls = next((s.id for s in known if s.advisory is None), known[0].id)
        if cls is None:
            return
        k = fl.key(cls, text) if not known else cls
        if k in self.causes:
            f = self.causes[k]
            f.count += 1
            f.sources.add(line.rank)
            if f.frame is None and frame is not None:
                f.frame = frame
            return
        if len(self.causes) >= MAX_CAUSES:
            self.causes_dropped += 1
            return
        self.causes[k] = fl.Failure(
            cls, line, frame, name, sources={line.rank}, candidates=tuple(s.id for s in known)
        )

    def finish(self) -> None:
        """At the end of the log: a traceback cut before its exception line is an error too."""
        for first, frame in self._tracker.unfinished():
            k = fl.key(fl.UNFINISHED, first.source)
            if k in self.causes:
                self.causes[k].count += 1
                self.causes[k].sources.add(first.rank)
            elif len(self.causes) < MAX_CAUSES:
                self.causes[k] = fl.Failure(fl.UNFINISHED, first, frame, None, sources={first.rank})
        self._tracker = fl.Tracker()

    @property
    def failures(self) -> list[fl.Failure]:
        return list(self.causes.values())

    @property
    def known_failures(self) -> list[fl.Failure]:
        ids = {s.id for s in self.known}
        return [f for f in self.causes.values() if f.cause in ids]

    @property
    def empty(self) -> bool:
        return self.text_lines == 0


def read_text(text: str, known: tuple[signatures.Signature, ...] | None = None) -> Reading:
    """A Reading of `text` (tests, and a log already in memory)."""
    reading = Reading(signatures.shipped() if known is None else known)
    for number, raw in enumerate(text.split("\n"), start=1):
        reading.feed_raw(number, raw.encode("utf-8", "surrogatepass"))
    reading.finish()
    return reading


def read_lines(rows: Iterable[tuple[int, bytes]], reading: Reading) -> Reading:
    for number, raw in rows:
        reading.feed_raw(number, raw)
    reading.finish()
    return reading
