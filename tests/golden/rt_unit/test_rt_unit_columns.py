"""``RtUnitModel.columns`` against ``RtUnitModel.step``, cycle by cycle, on random traces: the
block's own stimulus at several builds and rows of random bits (every field random, so fills
nobody asked for, waits of any word, stalls anywhere), in calls of uneven length so that lanes
and lines cross from one call to the next."""

import numpy as np
import pytest

from gpurtl.sim.core import registry
from gpurtl.sim.core.words import (
    columns_from_words,
    dicts_from_words,
    words_from_columns,
    words_from_dicts,
)

BUILDS = {
    "small": {},
    "beats_hints_plru": {"beats": 4, "hints": True, "replacement": "plru"},
    "two_engines_triangles": {"engines": 2, "boxes_per_engine": 2, "triangles": True},
    "one_slot": {"mshrs": 1, "targets": 1, "id_bits": 1, "tag_bits": 1},
}


def _traces(block, params, kind, count, seed):
    in_layout, _ = block.layouts(**params)
    rng = np.random.default_rng(seed)
    if kind == "stimulus":
        return words_from_dicts(in_layout, block.stimulus(rng, count, **params))
    width = words_from_dicts(in_layout, [block.input_defaults(params)]).shape[1]
    rows = rng.integers(0, 1 << 32, size=(count, width), dtype=np.uint64).astype(np.uint32)
    values = dicts_from_words(in_layout, rows)
    for value in values:  # lines from a few, so that some fills answer a miss and some hit
        ptr = value["inst"]["payload"]["node_ptr"]
        ptr[0] = (int(rng.integers(6)) << 4) | (ptr[0] & 0xF)
        value["fill"]["payload"]["line"] = int(rng.integers(6))
    return words_from_dicts(in_layout, values)


def _step_rows(block, params, rows):
    in_layout, out_layout = block.layouts(**params)
    model = block.golden(**params)
    return words_from_dicts(out_layout, [model.step(d) for d in dicts_from_words(in_layout, rows)])


def _column_rows(block, params, rows, model=None, splits=(0.3, 0.75)):
    in_layout, out_layout = block.layouts(**params)
    model = model or block.golden(**params)
    cuts = [0, *(int(len(rows) * s) for s in splits), len(rows)]
    parts = []
    for lo, hi in zip(cuts, cuts[1:]):
        columns = model.columns(columns_from_words(in_layout, rows[lo:hi]))
        parts.append(words_from_columns(out_layout, columns, hi - lo))
    return np.concatenate(parts)


def _first_difference(want, got):
    bad = np.flatnonzero(np.any(want != got, axis=1))
    return None if not len(bad) else int(bad[0])


@pytest.mark.parametrize("kind", ["stimulus", "random"])
@pytest.mark.parametrize("build", sorted(BUILDS))
def test_columns_equal_step_cycle_by_cycle(build, kind):
    block = registry.get("rt_unit")
    params = block.resolve(dict(block.small, **BUILDS[build]))
    rows = _traces(block, params, kind, 700, seed=len(build) + (kind == "random"))
    want = _step_rows(block, params, rows)
    got = _column_rows(block, params, rows)
    assert _first_difference(want, got) is None, (
        f"first differing cycle {_first_difference(want, got)}"
    )
    _, out_layout = block.layouts(**params)
    columns = columns_from_words(out_layout, want)
    assert columns["out.valid"].sum() > 20  # the trace exercised the accelerator
    if kind == "stimulus":
        assert columns["mem_req.valid"].sum() > 5


def test_the_comparison_sees_a_different_model():
    """The check can fail: a model whose accelerator is one cycle deeper differs from ``step``."""
    block = registry.get("rt_unit")
    params = block.resolve(dict(block.small))
    rows = _traces(block, params, "stimulus", 400, seed=3)
    want = _step_rows(block, params, rows)
    deeper = block.golden(**params)
    geometry, tag_bits, fields, groups, depth = deeper._build
    other = type(deeper)(geometry, tag_bits, accel_groups=groups, accel_depth=depth + 1, **fields)
    assert _first_difference(want, _column_rows(block, params, rows, model=other)) is not None


def test_one_instance_runs_step_or_columns():
    block = registry.get("rt_unit")
    params = block.resolve(dict(block.small))
    model = block.golden(**params)
    model.step(block.input_defaults(params))
    in_layout, _ = block.layouts(**params)
    rows = words_from_dicts(in_layout, [block.input_defaults(params)])
    with pytest.raises(ValueError, match="either `step` or `columns`"):
        model.columns(columns_from_words(in_layout, rows))
