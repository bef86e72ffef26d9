"""The FP32 depth presets mean the same depths everywhere: the top level's components and the
registry blocks of the same components, built at one preset, have the same latencies; an unknown
preset is refused with the list of presets."""

import pytest

from gpurtl.hdl.ray_accel.presets import FP_PRESETS, check_preset
from gpurtl.hdl.ray_accel.ray_accel import RayAccel
from gpurtl.sim.core import registry


@pytest.mark.parametrize("fp", sorted(FP_PRESETS))
def test_component_blocks_match_the_top_level(fp):
    top = RayAccel(fp=fp)
    engine = registry.get("ray_box_engine")
    setup = registry.get("ray_setup")
    sort = registry.get("ray_sort")
    built = {
        "engine": engine.build(**engine.resolve({"fp": fp})),
        "setup": setup.build(**setup.resolve({"fp": fp})),
        "sort": sort.build(**sort.resolve({"fp": fp})),
    }
    assert built["engine"].latency == top._box_engines[0].latency
    assert built["setup"].latency == top._setup.latency
    assert built["sort"].latency == top._sorter.latency
    assert built["sort"].core.split_compares == FP_PRESETS[fp]["split_compares"]


def test_presets_differ_and_unknown_is_refused():
    assert RayAccel(fp="shallow").latency < RayAccel(fp="fpga").latency
    with pytest.raises(ValueError, match="`fp` must be one of 'fpga', 'shallow', not 'deep'"):
        check_preset("deep")
    for name in ("ray_accel", "ray_box_engine", "ray_setup", "ray_sort"):
        assert registry.get(name).param("fp").choices == tuple(FP_PRESETS)
