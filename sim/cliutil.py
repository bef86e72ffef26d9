"""What every ``gpurtl`` command shares: checks of user input made before any work starts,
progress lines, and a quiet, clean exit on Ctrl-C.

A :class:`UsageError` becomes one ``gpurtl: error: ...`` line and exit status 2 in
:func:`gpurtl.sim.cli.main`.
"""

import contextlib
import math
import os
import shutil
import signal
import sys
import tempfile
import time
import warnings
from pathlib import Path

__all__ = [
    "UsageError",
    "EXIT_INTERRUPTED",
    "progress",
    "Progress",
    "check_output_file",
    "check_output_folder",
    "check_positive",
    "check_seed",
    "interrupted",
    "staged_folder",
]

#: Exit status after Ctrl-C, as a shell reports a process ended by SIGINT (128 + 2).
EXIT_INTERRUPTED = 130


class UsageError(Exception):
    """A mistake in the command line (bad option value, unusable output path)."""


def progress(message):
    """One progress line on stderr, flushed at once, whether or not stderr is a terminal (a log
    file of a long run shows where it is)."""
    print(f"gpurtl: {message}", file=sys.stderr, flush=True)


class Progress:
    """Progress of a long loop as ``progress(done, total, what)`` calls (the callback the
    experiments take): one line per step, at most one every ``interval`` seconds besides the first
    and the last step."""

    def __init__(self, name, interval=10.0):
        self.name, self.interval = name, interval
        self._last = None

    def __call__(self, done, total, what):
        now = time.monotonic()
        if self._last is not None and done < total and now - self._last < self.interval:
            return
        self._last = now
        progress(f"{self.name}: {done}/{total} {what}".rstrip())


def check_output_file(path, option):
    """Raise :class:`UsageError` unless ``path`` (``None`` and ``-`` mean stdout) can be written
    as a file: not a folder, in an existing, writable folder."""
    if path is None or str(path) == "-":
        return
    target = Path(path)
    if target.is_dir():
        raise UsageError(f"{option} `{path}` must be a file name, not a folder")
    folder = target.parent
    if not folder.exists():
        raise UsageError(f"{option} `{path}`: folder `{folder}` does not exist")
    if not folder.is_dir():
        raise UsageError(f"{option} `{path}`: `{folder}` is not a folder")
    _check_writable_folder(folder, option, path)
    if target.exists() and not os.access(target, os.W_OK):
        raise UsageError(f"{option} `{path}`: the file is not writable")


def _check_writable_folder(folder, option, path):
    # Creating a file is the only test that holds for every user and file system (root passes
    # os.access() on read-only mounts and /proc).
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as error:
        raise UsageError(
            f"{option} `{path}`: cannot write in folder `{folder}` ({error.strerror})"
        ) from None


def check_output_folder(path, option):
    """Raise :class:`UsageError` unless ``path`` is a folder, or can be created as one."""
    target = Path(path)
    if target.exists() and not target.is_dir():
        raise UsageError(f"{option} `{path}` must be a folder, not a file")
    existing = target
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise UsageError(f"{option} `{path}`: `{existing}` is not a folder")
    _check_writable_folder(existing, option, path)


def check_positive(value, option):
    """Raise :class:`UsageError` unless ``value`` is a positive number."""
    if value is not None and not (value > 0 and math.isfinite(value)):
        raise UsageError(f"{option} must be a positive number, not {value:g}")


def check_seed(value, option="--seed"):
    """Raise :class:`UsageError` unless ``value`` is a seed numpy accepts (a non-negative int)."""
    if value is not None and value < 0:
        raise UsageError(f"{option} must be a non-negative integer, not {value}")


@contextlib.contextmanager
def staged_folder(folder):
    """Yield a temporary sibling of ``folder`` to write into; on success it replaces ``folder``,
    on any failure or Ctrl-C it is removed, so an interrupted run leaves no stray files."""
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = folder.parent / f".{folder.name}.partial-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    try:
        yield staging
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if folder.exists():
        shutil.rmtree(folder)
    staging.rename(folder)


def interrupted():
    """What to do on Ctrl-C: ignore a second SIGINT during the clean-up (no chained traceback),
    silence Amaranth's warnings about designs that an interrupted run built but never simulated,
    print one line; returns the exit status."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from amaranth._unused import MustUse

    MustUse._MustUse__silence = True  # as Amaranth itself does when a program crashes
    warnings.simplefilter("ignore")
    print("gpurtl: interrupted", file=sys.stderr, flush=True)
    return EXIT_INTERRUPTED
