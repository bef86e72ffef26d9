"""What the ``gpurtl`` commands share besides files and progress lines: checks of option values
made before any work starts, and a quiet, clean exit on Ctrl-C."""

import math
import signal
import sys
import warnings

from ..core.files import UsageError

__all__ = [
    "EXIT_INTERRUPTED",
    "check_positive",
    "check_seed",
    "interrupted",
    "plural",
]

#: Exit status after Ctrl-C, as a shell reports a process ended by SIGINT (128 + 2).
EXIT_INTERRUPTED = 130


def plural(count, noun):
    """``"1 input"``, ``"2 inputs"``: ``count`` and ``noun``, with an ``s`` unless ``count`` is 1."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def check_positive(value, option):
    """Raise :class:`UsageError` unless ``value`` is a positive number."""
    if value is not None and not (value > 0 and math.isfinite(value)):
        raise UsageError(f"{option} must be a positive number, not {value:g}")


def check_seed(value, option="--seed"):
    """Raise :class:`UsageError` unless ``value`` is a seed numpy accepts (a non-negative int)."""
    if value is not None and value < 0:
        raise UsageError(f"{option} must be a non-negative integer, not {value}")


def interrupted():
    """What to do on Ctrl-C: ignore a second SIGINT during the clean-up (no chained traceback),
    silence Amaranth's warnings about designs that an interrupted run built but never simulated,
    print one line; returns the exit status."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Every warning from here to the exit is left out, Amaranth's about components that were
    # built and never elaborated (they come when the interpreter frees them) among them: as
    # Amaranth itself does after a crash, the interruption is the only news.
    warnings.simplefilter("ignore")
    print("gpurtl: interrupted", file=sys.stderr, flush=True)
    return EXIT_INTERRUPTED
