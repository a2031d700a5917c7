"""Run fp4doctor's command line with every file it opens recorded, for the tests (not shipped).

    python tests/audited.py LOG ARG...     # as `fp4doctor ARG...`

The modules the command needs are imported first; then `ready` is written to stdout and a
Python audit hook (PEP 578, `sys.addaudithook`) records the resolved path of every `open`
(builtin `open`, `os.open`, `Path.open`: all raise the `open` event) in LOG, NUL-separated.
Only then does the command run, so the test can give the command alone a deadline, and read
which files it opened, links resolved (a hook sees the name given, which may be a link).
"""

from __future__ import annotations

import os
import sys


def main() -> None:
    log, args = sys.argv[1], sys.argv[2:]
    sys.argv = ["fp4doctor", *args]
    from fp4doctor import checkpoint, cli, doctor, render  # noqa: F401  (start-up, not timed)

    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)

    def hook(event: str, hook_args: tuple[object, ...]) -> None:
        if event == "open" and isinstance(hook_args[0], (str, bytes, os.PathLike)):
            os.write(fd, os.fsencode(os.path.realpath(hook_args[0])) + b"\0")

    sys.stdout.write("ready\n")
    sys.stdout.flush()
    sys.addaudithook(hook)
    cli.main()


if __name__ == "__main__":
    main()
