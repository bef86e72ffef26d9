"""The RT unit's one source of defaults and geometry (``gpurtl.facts.rt_unit``): the registry,
the golden models and the RTL take the same fields and defaults from it, and a bad geometry is
refused with one line naming the field."""

import inspect

import pytest

from gpurtl.facts.rt_unit import FETCH_ORDER, FETCH_TAG_BITS, WAVE_TAG_BITS, L0Geometry
from gpurtl.golden.rt_unit import L0CacheModel, NodeFetchModel, RtUnitModel
from gpurtl.hdl.rt_unit import L0Cache, NodeFetch, RtUnit, l0_layouts
from gpurtl.sim.core import registry


@pytest.mark.parametrize("name", ["l0_cache", "node_fetch", "rt_unit"])
def test_the_registry_takes_its_geometry_from_the_bundle(name):
    params = registry.get(name).resolve()
    geometry, _ = L0Geometry.split(params)
    assert geometry == L0Geometry()
    assert set(L0Geometry.names()) <= set(params)


def test_one_default_for_each_tag_width_and_order():
    assert registry.get("node_fetch").resolve()["tag_bits"] == FETCH_TAG_BITS
    assert registry.get("node_fetch").resolve()["order"] == FETCH_ORDER
    assert registry.get("rt_unit").resolve()["tag_bits"] == WAVE_TAG_BITS
    for golden, rtl, expected in (
        (NodeFetchModel, NodeFetch, (FETCH_TAG_BITS, FETCH_ORDER)),
        (RtUnitModel, RtUnit, (WAVE_TAG_BITS,)),
    ):
        for cls in (golden, rtl):
            signature = inspect.signature(cls)
            names = ("tag_bits", "order")[: len(expected)]
            assert tuple(signature.parameters[n].default for n in names) == expected, cls


def test_the_models_and_the_rtl_take_the_bundle_or_its_fields():
    small = L0Geometry(size=1024, ways=2, mshrs=2, targets=3, id_bits=3, line_bits=8)
    fields = {name: getattr(small, name) for name in L0Geometry.names()}
    for cls in (L0CacheModel, L0Cache):
        assert cls(small).geometry == small == cls(**fields).geometry
    assert NodeFetch(small).l0.geometry == small
    assert NodeFetchModel(L0Geometry(), ways=2, size=1024).l0.geometry.sets == 4
    assert RtUnit(small, 1).fetch.l0.geometry == small


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"ways": 3}, "`ways` must be a power of two, not 3"),
        ({"size": 1536}, "`size` must make a power-of-two number of sets, not 3 sets"),
        ({"size": 100}, "`size` must be a positive multiple of 128 x ways, not 100"),
        ({"mshrs": 0}, "`mshrs` must be a positive integer, not 0"),
        ({"targets": True}, "`targets` must be a positive integer, not True"),
        ({"line_bits": 2, "size": 1024, "ways": 1}, "`line_bits` must be an integer above the 3"),
        ({"replacement": "fifo"}, "`replacement` must be one of lru, plru, not 'fifo'"),
        ({"beats": 3}, "`beats` must be a power of two up to 32, not 3"),
        ({"beats": 64}, "`beats` must be a power of two up to 32, not 64"),
    ],
)
def test_a_bad_geometry_is_one_line(fields, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        L0Geometry(**fields)
    with pytest.raises(
        registry.RegistryError, match="`(ways|size|mshrs|targets|line_bits|replacement|beats)`"
    ):
        registry.get("l0_cache").resolve(fields)


@pytest.mark.parametrize("beats", [1, 2, 32])
def test_the_fill_port_carries_one_beat(beats):
    request, response, mem_request, fill = l0_layouts(L0Geometry(beats=beats))
    assert fill["data"].width == 1024 // beats
    assert response["data"].width == 1024


def test_the_rdna4_preset_is_an_rdna4_size_build():
    """``-p preset=rdna4``: AMD's 32 KiB L0 of 128-byte lines, 32 wave tags, 8 box tests a
    cycle in 2 engines (one BVH8 node a cycle) with the triangle paths, ray buffer and MSHRs
    for 32 waves; another given parameter applies over the preset."""
    from gpurtl.sim.blocks.rt_unit import top_golden

    block = registry.get("rt_unit")
    params = block.resolve({"preset": "rdna4"})
    geometry, _ = L0Geometry.split({k: v for k, v in params.items() if k != "preset"})
    assert geometry.size == 32 * 1024 and geometry.sets * geometry.ways * 128 == 32768
    assert 1 << params["tag_bits"] == 32
    assert (params["engines"], params["boxes_per_engine"], params["triangles"]) == (2, 4, True)
    assert geometry.mshrs >= 32 and (1 << geometry.id_bits) >= 32
    model = top_golden(**params)
    assert model.accel.groups == 1  # initiation interval 1
    assert model.waves == 32
    assert block.resolve({"preset": "rdna4", "mshrs": "8"})["mshrs"] == 8
    assert block.resolve({"mshrs": "8", "preset": "rdna4"})["mshrs"] == 8
    assert block.resolve({"preset": "none"}) == dict(block.resolve(), preset="none")
    with pytest.raises(registry.RegistryError, match="`preset` must be one of 'none', 'rdna4'"):
        block.resolve({"preset": "rdna5"})
    with pytest.raises(registry.RegistryError, match="`tag_bits` must be an integer from 1 to 5"):
        block.resolve({"tag_bits": "6"})
