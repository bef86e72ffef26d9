"""The ``gpurtl`` console script.

Importing the command line loads Amaranth, numpy and the block registry: seconds on a cold start.
The import runs inside :func:`main`, so that Ctrl-C during it prints the same one line as Ctrl-C
during a command (``gpurtl: interrupted``, exit status 130) instead of a traceback. This module
imports nothing else of gpurtl at its top.
"""

import signal
import sys

__all__ = ["main"]

#: Exit status after Ctrl-C, as a shell reports a process ended by SIGINT (128 + 2); the same as
#: :data:`gpurtl.sim.tools.cliutil.EXIT_INTERRUPTED`.
EXIT_INTERRUPTED = 130


def main(argv=None):
    """Import :mod:`gpurtl.sim.tools.cli` and run its ``main(argv)``; its exit status."""
    try:
        from .cli import main as cli_main
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C cannot interrupt the exit
        print("gpurtl: interrupted", file=sys.stderr, flush=True)
        return EXIT_INTERRUPTED
    return cli_main(argv)


if __name__ == "__main__":
    sys.exit(main())
