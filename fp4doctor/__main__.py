"""`python -m fp4doctor`: the command line. Ctrl-C at any point, even while the modules load, is
one line on stderr and exit code 130, never a traceback."""

import sys

try:
    from fp4doctor.cli import main

    main()
except KeyboardInterrupt:
    sys.stderr.write("fp4doctor: interrupted\n")
    sys.exit(130)
