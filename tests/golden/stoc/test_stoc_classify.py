"""Directed checks of the STOC / OMM classification golden model against the published layouts and
tables (IGC ``RTStackFormat.h`` leaves and flags, Vulkan "Ray Opacity Micromap" states), with leaf
bits placed by hand."""

import pytest

from gpurtl.golden.stoc.classify import Action, Source, classify, plane_position

# points well inside the level-1 micro-triangles (Vulkan micromap curve, level 1: 0 near V0,
# 1 middle, 2 near V1, 3 near V2)
NEAR = {0: (0.1, 0.1), 1: (0.3, 0.3), 2: (0.8, 0.1), 3: (0.1, 0.8)}


def tx(**fields):
    base = {
        "source": Source.NONE,
        "tri": 0,
        "u": 0.1,
        "v": 0.1,
        "dw3": 0,
        "opaque": 0,
        "transp": 0,
        "swstoc": 0,
        "level": 0,
        "addr": 0,
        "omm_index": 0,
        "omm_format": 2,
        "omm_word": 0,
        "geom_opaque": 0,
        "ray_flags": 0,
        "instance_flags": 0,
        "internal_flags": 0,
    }
    base.update(fields)
    for key in ("u", "v"):
        if isinstance(base[key], float):
            import struct

            base[key] = struct.unpack("<I", struct.pack("<f", base[key]))[0]
    return base


@pytest.mark.parametrize("tri", [0, 1])
@pytest.mark.parametrize("sub", range(4))
def test_stoc1_planes_at_their_spec_bit_positions(tri, sub):
    o_shift, t_shift = (8, 12) if tri == 0 else (24, 28)
    u, v = NEAR[sub]
    opaque = classify(tx(source=Source.STOC1, tri=tri, u=u, v=v, dw3=1 << (o_shift + sub)))
    transp = classify(tx(source=Source.STOC1, tri=tri, u=u, v=v, dw3=1 << (t_shift + sub)))
    other_tri = classify(tx(source=Source.STOC1, tri=1 - tri, u=u, v=v, dw3=1 << (o_shift + sub)))
    assert (opaque["action"], opaque["state"], opaque["index"], opaque["level"]) == (
        Action.OPAQUE,
        1,
        sub,
        1,
    )
    assert (transp["action"], transp["state"]) == (Action.IGNORE, 0)
    assert (other_tri["action"], other_tri["state"]) == (Action.ANYHIT, 2)


@pytest.mark.parametrize("tri,bit", [(0, 5), (1, 6)])
def test_stoc1_swstoc_flag_only_for_unknown(tri, bit):
    unknown = classify(tx(source=Source.STOC1, tri=tri, dw3=1 << bit))
    assert (unknown["action"], unknown["sw_fallback"]) == (Action.ANYHIT, 1)
    o_shift = 8 if tri == 0 else 24
    known = classify(tx(source=Source.STOC1, tri=tri, dw3=(1 << bit) | (1 << o_shift)))
    assert (known["action"], known["sw_fallback"]) == (Action.OPAQUE, 0)
    wrong = classify(tx(source=Source.STOC1, tri=tri, dw3=1 << (11 - bit)))
    assert wrong["sw_fallback"] == 0


# Vulkan "Ray Opacity Micromap" result table: state -> (normal action, action with force-2-state)
RESULT = {
    0: (Action.IGNORE, Action.IGNORE),
    1: (Action.OPAQUE, Action.OPAQUE),
    2: (Action.ANYHIT, Action.IGNORE),
    3: (Action.ANYHIT, Action.OPAQUE),
}


@pytest.mark.parametrize("state", range(4))
def test_special_indices_and_force_2_state(state):
    index = -1 - state  # -1 T, -2 O, -3 UT, -4 UO
    for flags in ({}, {"ray_flags": 0x400}, {"instance_flags": 0x10}):
        got = classify(tx(source=Source.OMM, omm_index=index, **flags))
        assert got["state"] == state and got["used"] == 1
        assert got["action"] == RESULT[state][1 if flags else 0]
        assert got["sw_fallback"] == 0


@pytest.mark.parametrize(
    "flags",
    [
        {"instance_flags": 0x20},
        {"internal_flags": 0x8},
        {"instance_flags": 0x30, "ray_flags": 0x400},
    ],
)
def test_disable_reverts_to_geometry_flag(flags):
    for geom, want in ((0, Action.ANYHIT), (1, Action.OPAQUE)):
        got = classify(tx(source=Source.OMM, omm_index=-1, geom_opaque=geom, **flags))
        assert (got["action"], got["used"], got["error"]) == (want, 0, 0)


def test_omm_4_state_and_2_state_lookup_positions():
    # level 2 point inside micro-triangle 9 {(2,1),(3,1),(3,0)}/4: centroid (8/12, 2/12)
    u, v = 8 / 12, 2 / 12
    for fmt, bpp in ((2, 2), (1, 1)):
        bit = (9 * bpp) % 32
        word = 1 << bit  # state 1 (opaque) at micro-triangle 9
        got = classify(
            tx(source=Source.OMM, u=u, v=v, level=2, omm_format=fmt, omm_word=word, addr=0x1000)
        )
        assert (got["index"], got["state"], got["action"]) == (9, 1, Action.OPAQUE)
        assert got["fetch_addr"] == 0x1000 + 4 * ((9 * bpp) // 32)
        if fmt == 2:
            got = classify(tx(source=Source.OMM, u=u, v=v, level=2, omm_format=2, omm_word=3 << 18))
            assert (got["state"], got["action"]) == (3, Action.ANYHIT)


def test_omm_word_address_at_deep_level():
    got = classify(tx(source=Source.OMM, u=0.9, v=0.05, level=6, omm_format=2, addr=0x100))
    assert got["fine_index"] == got["index"]
    assert got["fetch_addr"] == 0x100 + 4 * (got["index"] // 16)


@pytest.mark.parametrize(
    "fields", [{"omm_format": 0}, {"omm_format": 3}, {"level": 13}, {"omm_index": -6}]
)
def test_omm_misuse_sets_error(fields):
    got = classify(tx(source=Source.OMM, geom_opaque=1, **fields))
    assert (got["error"], got["used"], got["action"]) == (1, 0, Action.OPAQUE)


def test_index_minus_5_is_no_data_without_error():
    got = classify(tx(source=Source.OMM, omm_index=-5))
    assert (got["error"], got["used"], got["action"]) == (0, 0, Action.ANYHIT)


def test_stoc3_inline_planes_and_fine_pointer():
    u, v = 0.8, 0.1  # level-1 child 2; its level-3 index lies in 32..47
    probe = classify(tx(source=Source.STOC3, u=u, v=v, level=8, addr=0x2000))
    k = probe["index"]
    assert 32 <= k < 48 and probe["level"] == 3
    assert probe["fine_index"] >> 10 == k  # level 8 index >> 2 (8 - 3)
    assert probe["fetch_addr"] == 0x2000 + 4 * (probe["fine_index"] // 16)
    assert classify(tx(source=Source.STOC3, u=u, v=v, opaque=1 << k))["action"] == Action.OPAQUE
    assert classify(tx(source=Source.STOC3, u=u, v=v, transp=1 << k))["action"] == Action.IGNORE
    both = classify(
        tx(source=Source.STOC3, u=u, v=v, opaque=1 << k, transp=1 << k, ray_flags=0x400)
    )
    assert (both["state"], both["action"]) == (3, Action.OPAQUE)
    assert (
        classify(
            tx(source=Source.STOC3, u=u, v=v, opaque=1 << k, transp=1 << k),
            both_planes="transparent",
        )["action"]
        == Action.IGNORE
    )
    sw = classify(tx(source=Source.STOC3, u=u, v=v, swstoc=1, level=8))
    assert (sw["sw_fallback"], sw["error"]) == (1, 0)
    bad = classify(tx(source=Source.STOC3, u=u, v=v, swstoc=1, level=3, opaque=1 << k))
    assert (bad["error"], bad["action"], bad["fine_level"]) == (1, Action.OPAQUE, 0)


def test_corner_plane_order():
    assert plane_position([0, 1, 2, 3], 1, "corners").tolist() == [0, 3, 1, 2]
    # level-2 index 6 = digits (1, 2) -> plane digits (3, 1) -> position 13
    assert int(plane_position(6, 2, "corners")) == 13
    got = classify(tx(source=Source.STOC1, u=0.3, v=0.3, dw3=1 << (8 + 3)), plane_order="corners")
    assert got["action"] == Action.OPAQUE
