"""``WaitCountersModel.columns`` (many cycles on per-field columns) against ``step`` (one cycle on
dictionaries, the model the RTL is checked against), cycle by cycle and field by field."""

import numpy as np
import pytest

from gpurtl.golden.waitcnt import WaitCountersModel
from gpurtl.sim.core import layouts, registry
from gpurtl.sim.core.words import columns_from_words, words_from_columns, words_from_ints

BLOCK = registry.get("waitcnt")


def _columns(in_layout, inputs):
    return {
        leaf.path: [int(_field(x, leaf.path)) for x in inputs] for leaf in layouts.leaves(in_layout)
    }


def _field(value, path):
    for part in path.split("."):
        value = value[part]
    return value


def _flat(value, prefix=""):
    """``{dotted path: int}`` of a nested output dictionary (lists as ``[index]``)."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            out.update(_flat(item, f"{prefix}.{key}" if prefix else key))
        return out
    if isinstance(value, list):
        out = {}
        for index, item in enumerate(value):
            out.update(_flat(item, f"{prefix}[{index}]"))
        return out
    return {prefix: int(value)}


@pytest.mark.parametrize(
    "params",
    [
        {"generation": "gfx12", "waves": 16},
        {"generation": "gfx12", "waves": 3, "full_policy": "saturate"},
        {"generation": "gfx11", "waves": 5},
        {"generation": "gfx10", "waves": 2, "full_policy": "saturate"},
        {"generation": "gfx9", "waves": 2},
    ],
)
def test_columns_equal_step_cycle_by_cycle(params):
    params = BLOCK.resolve(params)
    in_layout, _ = BLOCK.layouts(**params)
    rng = np.random.default_rng(5)
    reference, batch = WaitCountersModel(**params), WaitCountersModel(**params)
    seen_stall = seen_full = 0
    # chunks of several sizes, and single steps between them: the state carries over both ways
    for chunk in (1, 700, 1, 1500):
        inputs = BLOCK.stimulus(rng, chunk, **params)
        want = [_flat(reference.step(x)) for x in inputs]
        got = batch.columns(_columns(in_layout, inputs))
        assert set(got) == set(want[0])
        for path, column in got.items():
            assert len(column) == chunk
            for cycle, row in enumerate(want):
                assert int(column[cycle]) == row[path], (chunk, cycle, path)
        seen_stall += sum(row["stall"] != 0 for row in want)
        seen_full += sum(row["err.overflow"] or not row["issue_accepted"] for row in want)
        between = BLOCK.stimulus(rng, 1, **params)[0]
        assert reference.step(between) == batch.step(between)
    assert seen_stall and seen_full  # the stimulus reached waits and full counters


def test_columns_catch_an_unknown_class_as_step_does():
    params = BLOCK.resolve({"waves": 2})
    inputs = BLOCK.stimulus(np.random.default_rng(1), 4, **params)
    inputs[2]["issue"].update(valid=1, cls=15)
    in_layout, _ = BLOCK.layouts(**params)
    with pytest.raises(ValueError):
        WaitCountersModel(**params).step(inputs[2])
    with pytest.raises(ValueError):
        WaitCountersModel(**params).columns(_columns(in_layout, inputs))


def test_word_columns_round_trip_against_the_packer():
    params = BLOCK.resolve({})
    in_layout, out_layout = BLOCK.layouts(**params)
    inputs = BLOCK.stimulus(np.random.default_rng(2), 300, **params)
    outputs = [WaitCountersModel(**params).step(x) for x in inputs]
    for layout, values in ((in_layout, inputs), (out_layout, outputs)):
        words = words_from_ints(layout, [layouts.pack(layout, v) for v in values])
        columns = columns_from_words(layout, words)
        for leaf in layouts.leaves(layout):
            want = [int(_flat(v)[leaf.path]) & ((1 << leaf.width) - 1) for v in values]
            assert columns[leaf.path].tolist() == want, leaf.path
        assert np.array_equal(words_from_columns(layout, columns, len(values)), words)
    columns.pop("stall")
    with pytest.raises(ValueError, match="`stall`"):
        words_from_columns(out_layout, columns, len(outputs))


def test_a_value_the_field_cannot_hold_is_an_error():
    params = BLOCK.resolve({})
    _, out_layout = BLOCK.layouts(**params)
    columns = {leaf.path: np.zeros(4, dtype=np.int64) for leaf in layouts.leaves(out_layout)}
    columns["cnt[2].load"][3] = 64  # a 6-bit count
    with pytest.raises(ValueError, match=r"`cnt\[2\].load` row 3: 64 does not fit 6 bits"):
        words_from_columns(out_layout, columns, 4)
    columns["cnt[2].load"][3] = -1
    with pytest.raises(ValueError, match="row 3: -1"):
        words_from_columns(out_layout, columns, 4)
