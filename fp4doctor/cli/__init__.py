"""The command line: parse, call the doctor core, render, pick the exit code.

Exit codes (a contract, see README):
  0  ready as set: the kernel the engine will run per family can run here, no known bug
  1  not ready: as set it runs a kernel that cannot run (the fix is named), or no valid path
  2  usage or profile error
  3  no verdict could be reached (e.g. NVML cannot tell which GPUs exist)
  4  could not write the output (a full disk, a closed stdout or pipe); one line on stderr
  130  interrupted (Ctrl-C, also while starting up); one line on stderr, no partial output
  143  terminated (SIGTERM), the same way

Output fits the stream: where stdout or stderr cannot carry UTF-8 (a C or Latin-1 locale,
PYTHONIOENCODING=ascii) what it cannot carry is written in ASCII (`terminal.fit`), JSON as
`\\u` escapes; text from outside (facts, versions, environment values) reaches a terminal with
its control characters escaped (`terminal.clean`).

    app        the top-level group; each command's module loads when that command runs
    (fp4doctor/console.py: stdout and stderr, the user errors, the exit codes and the command
    classes; fp4doctor/options.py: the options every question-asking command shares, and
    `env`/`config`'s settle. Both live outside this package so that node and fleet share them
    without importing the command line.)
    check, env, config, explain, diff, probe, profiles: one command (or group) each
    (node and fleet: fp4doctor/fleet/commands.py)

The console script imports this package and calls `main`: `startup.begin` (standard library
only) runs first, so that Ctrl-C while the modules load is one line and exit 130, NVML starts
in the driver beside the imports, and the garbage collector is held off (fp4doctor/startup.py).
"""

import sys

from fp4doctor import startup

startup.begin(sys.argv)

from fp4doctor.cli.app import main  # noqa: E402

startup.loaded()

__all__ = ["main"]
