"""Keeping the build cache (:func:`gpurtl.sim.core.export.cache_dir`) within bounds.

Each compiled model is one *entry*: a folder under ``fast/build/``, ``verilator/`` or
``icarus/``. A backend marks an entry used (:func:`touch`) whenever it runs it, and prunes the
cache (:func:`prune`) after each build it makes: entries unused for more than
``$GPURTL_CACHE_DAYS`` days (default :data:`MAX_AGE_DAYS`) are removed, then the least recently
used ones until the entries take at most ``$GPURTL_CACHE_LIMIT`` gigabytes (default
:data:`LIMIT_GB`; ``0`` turns pruning off). An entry used within the last :data:`RECENT_S`
seconds is never removed, so a long run keeps its model even when the cache is over its limit
for a while; scratch folders of builds that stopped (``*.partial``) go after a day too.
"""

import os
import shutil
import time
from pathlib import Path

from .export import cache_dir

__all__ = [
    "ENTRY_FOLDERS",
    "LIMIT_ENV",
    "LIMIT_GB",
    "MAX_AGE_DAYS",
    "MAX_AGE_ENV",
    "RECENT_S",
    "entries",
    "prune",
    "size_of",
    "touch",
]

#: Folders of the cache whose subfolders are entries.
ENTRY_FOLDERS = ("fast/build", "verilator", "icarus", "sliced/aig", "sliced/build")

#: Environment variables of the limits, and their defaults.
LIMIT_ENV, LIMIT_GB = "GPURTL_CACHE_LIMIT", 10.0
MAX_AGE_ENV, MAX_AGE_DAYS = "GPURTL_CACHE_DAYS", 30.0

#: An entry used this recently (seconds) is kept whatever the limits say.
RECENT_S = 24 * 3600

_MARK = ".used"


def touch(folder):
    """Mark the entry ``folder`` used now."""
    folder = Path(folder)
    if folder.is_dir():
        (folder / _MARK).touch()


def _last_used(entry):
    try:
        return (entry / _MARK).stat().st_mtime
    except OSError:
        return entry.stat().st_mtime


def size_of(folder):
    """Bytes of the files under ``folder`` (links not followed)."""
    total = 0
    for base, _, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(base, name)).st_size
            except OSError:
                pass
    return total


def entries(root=None):
    """``(path, last used, bytes)`` of every entry, least recently used first."""
    root = Path(root) if root is not None else cache_dir()
    found = []
    for sub in ENTRY_FOLDERS:
        folder = root / sub
        if not folder.is_dir():
            continue
        for entry in folder.iterdir():
            if entry.is_dir() and not entry.name.endswith(".partial"):
                found.append((entry, _last_used(entry), size_of(entry)))
    return sorted(found, key=lambda item: item[1])


def _number(name, default):
    text = os.environ.get(name)
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if value < 0:
        from .files import UsageError

        raise UsageError(f"${name} must be a non-negative number, not {text!r}")
    return value


def prune(root=None, *, limit_gb=None, max_age_days=None, now=None):
    """Remove old and least recently used entries (see the module doc string); returns the
    removed ``(path, bytes)``."""
    root = Path(root) if root is not None else cache_dir()
    limit_gb = _number(LIMIT_ENV, LIMIT_GB) if limit_gb is None else limit_gb
    max_age_days = _number(MAX_AGE_ENV, MAX_AGE_DAYS) if max_age_days is None else max_age_days
    if limit_gb == 0:
        return []
    now = time.time() if now is None else now
    removed = []
    for sub in ENTRY_FOLDERS:  # scratch folders of builds that stopped
        folder = root / sub
        for scratch in folder.glob("*.partial") if folder.is_dir() else ():
            if now - scratch.stat().st_mtime > RECENT_S:
                removed.append((scratch, size_of(scratch)))
                shutil.rmtree(scratch, ignore_errors=True)
    found = entries(root)
    total = sum(size for _, _, size in found)
    for entry, used, size in found:
        if now - used <= RECENT_S:
            break  # least recently used first: every later entry is more recent
        if now - used > max_age_days * 86400 or total > limit_gb * 1e9:
            shutil.rmtree(entry, ignore_errors=True)
            removed.append((entry, size))
            total -= size
    return removed
