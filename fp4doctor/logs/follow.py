"""`verify-log --follow`: a log still being written, read as it grows (``tail -f``, from its
first line), with the verdict reported as soon as it is known.

- The start-up verdict is printed once every family fp4doctor predicts has its kernel line (or
  the log has its first error), before the engine has finished starting.
- The first error is printed with its diagnosis as soon as it is read.
- The reader stops at the end of what is written once the engine said it is up (vLLM's
  ``Application startup complete``, SGLang's ``The server is fired up and ready to roll``) or
  once an error was read (the rest of a traceback written with it is read first), or when
  `timeout` seconds have passed (default 900: a first start that compiles and tunes kernels can
  take minutes); a pipe (``-``) also ends when its writer closes it.

The engine's own output is not touched: verify-log only reads the file it writes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from fp4doctor.logs.reading import Reading

DEFAULT_TIMEOUT = 900.0
POLL = 0.25


@dataclass
class Follow:
    """The stop policy, called at each end of what is written so far: True to keep waiting."""

    reading: Reading
    timeout: float = DEFAULT_TIMEOUT
    clock: Callable[[], float] = time.monotonic
    _deadline: float = field(init=False, default=0.0)

    def __post_init__(self) -> None:
        self._deadline = self.clock() + self.timeout

    def __call__(self) -> bool:
        if self.reading.started is not None or self.reading.causes:
            return False
        if self.clock() >= self._deadline:
            self.reading.tally.timed_out = True
            return False
        return True
