"""The errors in a log, known or not: Python exceptions (with the traceback frame nearest an FP4
module), CUDA and launch errors, NCCL errors, assertions, crashes, and lines the engine's logger
wrote at ERROR. Each is a cause; the same cause on many lines or ranks is one `Failure` with a
count.

Tracebacks are followed per writer (`Line.source`): with several ranks interleaved, each rank's
frames stay with its own exception. Inside a traceback only the frame lines and the exception
line count: the source lines the traceback quotes (``assert x``, ``raise RuntimeError``) are not
errors of their own.

Every test is a substring test or a pattern anchored at the start of the line with bounded
repetitions: time is linear in the line's length.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from fp4doctor.logs.lines import Line

# Generic classes, the most telling first: a line is put in the first class it fits.
CLASSES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("cuda-error", "a CUDA error", (
        "CUDA error", "CUDA Error", "CUDA_ERROR_", "cudaError", "CUDA driver error",
        "CUBLAS_STATUS_", "CUDNN_STATUS_", "cuDNN error", "CUDA out of memory",
        "illegal memory access", "illegal instruction", "misaligned address",
    )),
    ("launch-failure", "a kernel launch failure", (
        "launch failure", "Failed to launch", "failed to launch", "too many resources requested",
        "Failed to initialize the TMA descriptor", "kernel launch failed",
    )),
    ("nccl-error", "an NCCL error", (
        "NCCL error", "ncclInternalError", "ncclUnhandledCudaError", "ncclSystemError",
        "ncclInvalidUsage", "ncclRemoteError",
    )),
    ("assertion", "an assertion", (
        "AssertionError", "Assertion `", "Assertion failed", "assertion failed",
        "device-side assert", "TORCH_CHECK", "Check failed",
    )),
    ("crash", "a crash", (
        "Segmentation fault", "SIGSEGV", "SIGABRT", "SIGBUS", "Fatal Python error",
        "core dumped", "terminate called after throwing", "died with exit code",
        "exited unexpectedly", "exit code -", "Caught signal",
    )),
    # The engine saying it failed (its cause is usually in the lines before).
    ("engine-failure", "the engine's own failure notice", (
        "Scheduler hit an exception", "EngineCore failed to start", "WorkerProc failed to start",
        "Engine core initialization failed", "[TensorRT-LLM][ERROR]", "[TRT-LLM] [E]",
    )),
)  # fmt: skip
EXCEPTION = "exception"
ERROR_LINE = "error-line"
UNFINISHED = "traceback"
CLASS_TITLES = {c: t for c, t, _ in CLASSES} | {
    EXCEPTION: "a Python exception",
    ERROR_LINE: "a line logged at ERROR",
    UNFINISHED: "a Python traceback whose exception line is not in the log",
}

_TRACEBACK = "Traceback (most recent call last)"
_FRAME = re.compile(
    r'\s{0,16}File "(?P<path>[^"]{1,1000})", line (?P<line>\d{1,9}), in (?P<fn>\S{1,200})'
)
# An exception line that ends a traceback: a dotted name and a colon (or nothing after it).
_RAISED = re.compile(r"(?P<name>(?:[A-Za-z_]\w{0,100}\.){0,12}[A-Za-z_]\w{0,100})(?::(?: |$)|$)")
# Outside a traceback, only names that say they are errors.
_ERROR_NAME = re.compile(r"\w{0,100}(?:Error|Exception|Failed|Failure|Fault|Exit)$")
# The modules an FP4 GEMM or MoE runs in: the frame nearest one is quoted.
_FP4_MODULES = (
    "quantization", "fused_moe", "flashinfer", "cutlass", "nvfp4", "fp4", "modelopt",
    "compressed_tensors", "marlin", "trtllm", "tensorrt_llm", "cudnn", "moe", "deep_gemm",
    "kernels/linear", "layers/linear", "sgl_kernel",
)  # fmt: skip
# The lines the CUDA runtime's message adds after the error itself: no cause of their own.
_NOISE = ("CUDA kernel errors might be asynchronously reported", "For debugging consider passing",
          "Compile with `TORCH_USE_CUDA_DSA`", "Search for `cuda", "Search for `CUDA")  # fmt: skip


def is_noise(text: str) -> bool:
    return any(n in text for n in _NOISE)


@dataclass(frozen=True)
class Frame:
    path: str
    line: int
    function: str

    def __str__(self) -> str:
        return f"{_short(self.path)}:{self.line} in {self.function}"

    @property
    def fp4(self) -> bool:
        p = self.path.replace("\\", "/").lower()
        return any(m in p for m in _FP4_MODULES)


@dataclass
class Failure:
    """One cause, first seen on `first`."""

    cause: str  # a signature id (fp4doctor/logs/signatures) or a class of CLASS_TITLES
    first: Line
    frame: Frame | None  # the traceback frame nearest an FP4 module, where there is one
    exception: str | None  # the exception's name, where the line raises one
    count: int = 1
    sources: set[str] = field(default_factory=set)
    candidates: tuple[str, ...] = ()  # every signature the line matches, the file's order

    @property
    def quote(self) -> str:
        return quote(self.first.text)


@dataclass
class _Traceback:
    frames: list[Frame] = field(default_factory=list)
    active: bool = False
    first: Line | None = None  # where it began


class Tracker:
    """Reads lines one by one; `classify` says whether a line is an error and of which kind."""

    def __init__(self) -> None:
        self._tracebacks: dict[str, _Traceback] = {}

    def classify(self, line: Line) -> tuple[str | None, str | None, Frame | None]:
        """(class, exception name, frame) for an error line; (None, None, None) for any other.
        The class is None also for a frame of a traceback (it is remembered)."""
        text = line.text
        tb = self._tracebacks.setdefault(line.source, _Traceback())
        stripped = text.lstrip()
        if _TRACEBACK in text:  # also SGLang's "Scheduler hit an exception: Traceback (...)"
            announced = not stripped.startswith(_TRACEBACK)
            tb.frames.clear()
            tb.active, tb.first = True, line
            if announced:
                return self._error_class(text, None), None, None
            return None, None, None
        if m := _FRAME.match(text):  # a frame, with or without its "Traceback" line
            if not tb.active:
                tb.frames.clear()
                tb.active, tb.first = True, line
            tb.frames.append(Frame(m["path"], int(m["line"]), m["fn"]))
            return None, None, None
        if tb.active:
            if text[:1].isspace() or not stripped or stripped.startswith(("^", "~", "...")):
                return None, None, None  # the source line a frame quotes, or its markers
            if stripped.startswith(("During handling", "The above exception")):
                return None, None, None
            m = _RAISED.match(text)
            tb.active = False
            if m is not None:
                return self._error_class(text, EXCEPTION), m["name"], nearest_fp4(tb.frames)
        if is_noise(text):
            return None, None, None
        name = None
        if text[:1].isalpha() or text[:1] == "_":
            m = _RAISED.match(text)
            if m is not None and ":" in text[: m.end()] and _ERROR_NAME.search(m["name"][-110:]):
                name = m["name"]
        cls = self._error_class(text, EXCEPTION if name else None)
        if cls is None and line.level in ("ERROR", "CRITICAL"):
            if text[:1].isspace():  # a traceback's source line logged at ERROR, its frame cut
                tb.active, tb.first = True, line
                return None, None, None
            cls = ERROR_LINE
        if cls is None:
            return None, None, None
        return cls, name, nearest_fp4(tb.frames) if (name or tb.active) else None

    def unfinished(self) -> list[tuple[Line, Frame | None]]:
        """The tracebacks still open at the end of the log (a paste cut before the exception
        line): each its first line and the frame nearest an FP4 module."""
        return [(tb.first, nearest_fp4(tb.frames)) for tb in self._tracebacks.values()
                if tb.active and tb.first is not None]  # fmt: skip

    @staticmethod
    def _error_class(text: str, default: str | None) -> str | None:
        for cls, _, needles in CLASSES:
            if any(n in text for n in needles):
                return cls
        return default


def nearest_fp4(frames: list[Frame]) -> Frame | None:
    """The innermost frame in an FP4 module; else the innermost frame of all."""
    for f in reversed(frames):
        if f.fp4:
            return f
    return frames[-1] if frames else None


def quote(text: str, width: int = 300) -> str:
    text = text.strip()
    return text if len(text) <= width else text[: width - 1] + "…"


def _short(path: str) -> str:
    """A frame's path from its package on (site-packages/vllm/x.py: vllm/x.py)."""
    p = path.replace("\\", "/")
    for marker in ("site-packages/", "dist-packages/"):
        if marker in p:
            return p.rsplit(marker, 1)[1]
    return p


def key(cause: str, text: str) -> str:
    """What makes two failures one cause: the class and the message with its numbers, addresses
    and paths blurred (the same error on eight ranks, or at two shapes, is one)."""
    return cause + "\0" + _BLUR.sub("#", text.strip()[:200])


_BLUR = re.compile(r"0x[0-9a-fA-F]{1,16}|\d{1,20}")
