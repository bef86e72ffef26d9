"""CyclePorts: every stream of the wrapped component in the right direction."""

import pytest
from amaranth.hdl import Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from gpurtl.hdl.rt_unit import CyclePorts, cycle_layouts


def test_streams_and_plain_ports_are_split_by_direction():
    signature = wiring.Signature(
        {
            "a": In(stream.Signature(8)),
            "b": Out(stream.Signature(data.StructLayout({"x": 3}))),
            "c": In(2),
            "d": Out(1),
        }
    )
    ins, outs = cycle_layouts(signature)
    assert list(ins.members) == ["a", "b", "c"]
    assert list(outs.members) == ["a", "b", "d"]
    assert list(ins["a"].shape.members) == ["valid", "payload"]
    assert list(outs["a"].shape.members) == ["ready"]
    assert list(outs["b"].shape.members) == ["valid", "payload"]
    assert list(ins["b"].shape.members) == ["ready"]


def test_a_non_stream_interface_is_refused():
    inner = wiring.Signature({"x": Out(1)})
    with pytest.raises(TypeError, match="`bus` must be a port or a stream"):
        cycle_layouts(wiring.Signature({"bus": Out(inner)}))
    with pytest.raises(TypeError, match="`inner` must be a wiring.Component"):
        CyclePorts(Signal())
