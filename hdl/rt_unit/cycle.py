"""A cycle-stepped view of a component with stream ports, for the registry and its tools.

The registry's ``"cycle"`` blocks have one input port ``i`` and one output port ``o``. The RT
unit's blocks talk over several :mod:`amaranth.lib.stream` interfaces in both directions (a
request stream in, responses out, a memory request stream out, fills in), and a testbench or a
behavioural memory has to see every ``valid``/``ready`` of them every cycle. :class:`CyclePorts`
wraps such a component: each stream the component consumes becomes ``i.NAME.valid``,
``i.NAME.payload`` and ``o.NAME.ready``; each stream it produces becomes ``o.NAME.valid``,
``o.NAME.payload`` and ``i.NAME.ready``; plain ports go to ``i`` or ``o`` under their own name.
"""

from amaranth.hdl import Module
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["CyclePorts", "cycle_layouts"]


def cycle_layouts(signature):
    """``(in_layout, out_layout)`` of :class:`CyclePorts` around a component of ``signature``."""
    ins, outs = {}, {}
    for name, member in signature.members.items():
        if member.is_signature:
            if not isinstance(member.signature, stream.Signature):
                raise TypeError(f"`{name}` must be a port or a stream, not {member.signature!r}")
            payload = member.signature.members["payload"].shape
            flow_in = data.StructLayout({"valid": 1, "payload": payload})
            if member.flow == In:
                ins[name], outs[name] = flow_in, data.StructLayout({"ready": 1})
            else:
                outs[name], ins[name] = flow_in, data.StructLayout({"ready": 1})
        elif member.flow == In:
            ins[name] = member.shape
        else:
            outs[name] = member.shape
    return data.StructLayout(ins), data.StructLayout(outs)


class CyclePorts(wiring.Component):
    """``inner`` with its ports gathered into ``i: In(in_layout)`` and ``o: Out(out_layout)``.

    Parameters
    ----------
    inner : wiring.Component
        The wrapped component; its facts (``details``, parameters) are reached through
        ``self.inner``.
    """

    def __init__(self, inner):
        if not isinstance(inner, wiring.Component):
            raise TypeError(f"`inner` must be a wiring.Component, not {inner!r}")
        self.inner = inner
        in_layout, out_layout = cycle_layouts(inner.signature)
        super().__init__({"i": In(in_layout), "o": Out(out_layout)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.inner = inner = self.inner
        for name, member in inner.signature.members.items():
            port = getattr(inner, name)
            if member.is_signature:
                if member.flow == In:
                    m.d.comb += [
                        port.valid.eq(self.i[name].valid),
                        port.payload.eq(self.i[name].payload),
                        self.o[name].ready.eq(port.ready),
                    ]
                else:
                    m.d.comb += [
                        self.o[name].valid.eq(port.valid),
                        self.o[name].payload.eq(port.payload),
                        port.ready.eq(self.i[name].ready),
                    ]
            elif member.flow == In:
                m.d.comb += port.eq(self.i[name])
            else:
                m.d.comb += self.o[name].eq(port)
        return m
