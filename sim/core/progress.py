"""Progress of long runs: one line on stderr, at most one every few seconds."""

import sys
import time

__all__ = ["Every", "Progress", "progress"]


def progress(message):
    """One progress line on stderr, flushed at once, whether or not stderr is a terminal (a log
    file of a long run shows where it is)."""
    print(f"gpurtl: {message}", file=sys.stderr, flush=True)


class Every:
    """A clock that says when the next progress report is due: at most once per ``interval``
    seconds, and at the first call when ``first`` is true."""

    def __init__(self, interval=10.0, *, first=False):
        self.interval = interval
        self._last = None if first else time.monotonic()

    def __call__(self, force=False):
        """Whether a report is due now (always when ``force``); a due report resets the clock."""
        now = time.monotonic()
        if force or self._last is None or now - self._last >= self.interval:
            self._last = now
            return True
        return False


class Progress:
    """Progress of a long loop as ``progress(done, total, what)`` calls (the callback the
    experiments take): one line per step, at most one every ``interval`` seconds besides the first
    and the last step."""

    def __init__(self, name, interval=10.0):
        self.name = name
        self._due = Every(interval, first=True)

    def __call__(self, done, total, what):
        if self._due(force=done >= total):
            progress(f"{self.name}: {done}/{total} {what}".rstrip())
