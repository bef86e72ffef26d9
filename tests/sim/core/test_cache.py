"""Pruning the build cache (:mod:`gpurtl.sim.core.cache`): old entries go, then the least
recently used ones until the limit holds; recent entries and other files stay."""

import os

import pytest

from gpurtl.sim.core import cache
from gpurtl.sim.core.files import UsageError

DAY = 86400.0


def _entry(root, sub, name, size, used):
    folder = root / sub / name
    folder.mkdir(parents=True)
    (folder / "model").write_bytes(b"x" * size)
    cache.touch(folder)
    os.utime(folder / ".used", (used, used))
    return folder


def test_old_and_least_recently_used_entries_go_first(tmp_path):
    now = 1e9
    old = _entry(tmp_path, "verilator", "old-1", 100, now - 40 * DAY)
    a = _entry(tmp_path, "fast/build", "a-1", 400, now - 5 * DAY)
    b = _entry(tmp_path, "fast/build", "b-1", 400, now - 3 * DAY)
    recent = _entry(tmp_path, "icarus", "c-1", 400, now - 60)
    other = tmp_path / "synth" / "keep.json"
    other.parent.mkdir()
    other.write_text("{}")
    assert [e[0] for e in cache.entries(tmp_path)] == [old, a, b, recent]
    removed = cache.prune(tmp_path, limit_gb=900e-9, max_age_days=30, now=now)
    # the 40-day entry by age; then `a` (least recently used) until 800 bytes <= 900
    assert [path for path, _ in removed] == [old, a]
    assert not old.exists() and not a.exists()
    assert b.exists() and recent.exists() and other.exists()
    # over the limit, but what is left was used within a day or is needed to get under it
    removed = cache.prune(tmp_path, limit_gb=100e-9, max_age_days=30, now=now)
    assert [path for path, _ in removed] == [b]
    assert recent.exists()


def test_limit_zero_turns_pruning_off_and_bad_limits_are_refused(tmp_path, monkeypatch):
    old = _entry(tmp_path, "verilator", "old-1", 10, 1.0)
    assert cache.prune(tmp_path, limit_gb=0) == []
    assert old.exists()
    monkeypatch.setenv(cache.LIMIT_ENV, "lots")
    with pytest.raises(UsageError, match=r"\$GPURTL_CACHE_LIMIT must be a non-negative number"):
        cache.prune(tmp_path)


def test_stopped_builds_scratch_folders_go_after_a_day(tmp_path):
    now = 1e9
    scratch = tmp_path / "fast" / "build" / "x-1.123.partial"
    scratch.mkdir(parents=True)
    os.utime(scratch, (now - 2 * DAY, now - 2 * DAY))
    fresh = tmp_path / "fast" / "build" / "y-1.124.partial"
    fresh.mkdir()
    os.utime(fresh, (now - 60, now - 60))
    cache.prune(tmp_path, limit_gb=10, now=now)
    assert not scratch.exists() and fresh.exists()
