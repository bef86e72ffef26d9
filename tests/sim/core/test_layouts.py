import pytest
from amaranth.hdl import signed, unsigned
from amaranth.lib import data

from gpurtl.facts.fp32 import Float32, bits_f32, f32_bits
from gpurtl.facts.waitcnt import InstClass
from gpurtl.sim.core import layouts

LAYOUT = data.StructLayout(
    {
        "a": unsigned(3),
        "n": signed(5),
        "f": Float32,
        "cls": InstClass,
        "arr": data.ArrayLayout(data.StructLayout({"x": 2, "y": 1}), 3),
    }
)


def test_round_trip_matches_amaranth_const():
    value = {
        "a": 5,
        "n": -3,
        "f": f32_bits(1.5),
        "cls": 4,
        "arr": [{"x": 1, "y": 0}, {"x": 3, "y": 1}, {"x": 0, "y": 1}],
    }
    bits = layouts.pack(LAYOUT, value)
    # Independent: Amaranth's own constant packing of the same value.
    amaranth_bits = LAYOUT.const(
        {**value, "cls": InstClass(4), "arr": [dict(e) for e in value["arr"]]}
    ).as_bits()
    assert bits == amaranth_bits
    assert layouts.unpack(LAYOUT, bits) == value


def test_out_of_range_and_missing_fields_are_named():
    good = {"a": 0, "n": 0, "f": 0, "cls": 0, "arr": [{"x": 0, "y": 0}] * 3}
    with pytest.raises(layouts.LayoutValueError, match=r"field `a`: must be in 0\.\.7"):
        layouts.pack(LAYOUT, {**good, "a": 8})
    with pytest.raises(layouts.LayoutValueError, match=r"field `n`: must be in -16\.\.15"):
        layouts.pack(LAYOUT, {**good, "n": 16})
    with pytest.raises(layouts.LayoutValueError, match=r"field `arr\[2\]\.y`: is missing"):
        layouts.pack(LAYOUT, {**good, "arr": [{"x": 0, "y": 0}] * 2 + [{"x": 0}]})
    with pytest.raises(layouts.LayoutValueError, match="must be one of"):
        layouts.pack(LAYOUT, {**good, "cls": "NOPE"})


def test_enum_by_name_and_float_values():
    good = {"a": 0, "n": 0, "f": 2.0, "cls": "SMEM", "arr": [{"x": 0, "y": 0}] * 3}
    out = layouts.unpack(LAYOUT, layouts.pack(LAYOUT, good))
    assert out["cls"] == InstClass.SMEM.value
    assert bits_f32(out["f"]) == 2.0


def test_diff_names_first_differing_leaf():
    a = layouts.pack(LAYOUT, {"a": 1, "n": 0, "f": 0, "cls": 0, "arr": [{"x": 0, "y": 0}] * 3})
    b = a ^ (1 << layouts.leaves(LAYOUT)[-1].offset)
    leaf, expected, got = layouts.diff(LAYOUT, a, b)
    assert leaf.path == "arr[2].y" and (expected, got) == (0, 1)
    assert layouts.diff(LAYOUT, a, a) is None


def test_generated_pack_and_unpack_equal_the_general_loops():
    import random

    import numpy as np

    rng = random.Random(5)
    for _ in range(200):
        bits = rng.getrandbits(LAYOUT.size)
        value = layouts._unpack(LAYOUT, bits)
        assert layouts.unpack(LAYOUT, bits) == value
        assert layouts.pack(LAYOUT, value) == bits
    # numpy integers are taken as their values, not wrapped at their own width
    value = layouts._unpack(LAYOUT, (1 << LAYOUT.size) - 1)
    value["arr"][2]["x"] = np.uint8(3)
    assert layouts.pack(LAYOUT, value) == (1 << LAYOUT.size) - 1
    # a float in an integer field is refused by name, as by the general loop
    with pytest.raises(layouts.LayoutValueError, match=r"field `a`: must be an integer"):
        layouts.pack(LAYOUT, {**value, "a": 1.0})
