"""The model the RT-unit player (:mod:`.player`) steps: the ``rt_unit`` build and a
``ds_bvh_stack`` side by side, exported and Verilated once."""

from amaranth.hdl import Module
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from ...core import registry

__all__ = ["PlayerUnit", "build", "split_params"]


class PlayerUnit(wiring.Component):
    """The ``rt_unit`` build and a ``ds_bvh_stack`` side by side, their ports gathered into
    ``i: In({"rt": ..., "ds": ...})`` and ``o: Out({"rt": ..., "ds": ...})`` (each the
    :class:`~gpurtl.hdl.rt_unit.cycle.CyclePorts` form of its block), so the player steps one
    Verilated model.

    Parameters
    ----------
    rt : dict
        ``rt_unit`` registry parameters (resolved).
    stack : dict
        ``ds_bvh_stack`` registry parameters (resolved).
    """

    def __init__(self, rt, stack):
        self._rt = registry.get("rt_unit").build(**rt)
        self._ds = _stack_ports(registry.get("ds_bvh_stack").build(**stack))
        in_layout = data.StructLayout(
            {"rt": self._rt.i.shape(), "ds": self._ds.i.shape()}  # type: ignore[attr-defined]
        )
        out_layout = data.StructLayout(
            {"rt": self._rt.o.shape(), "ds": self._ds.o.shape()}  # type: ignore[attr-defined]
        )
        super().__init__({"i": In(in_layout), "o": Out(out_layout)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.rt = self._rt
        m.submodules.ds = self._ds
        m.d.comb += [
            self._rt.i.eq(self.i.rt),
            self._ds.i.eq(self.i.ds),
            self.o.rt.eq(self._rt.o),
            self.o.ds.eq(self._ds.o),
        ]
        return m


def _stack_ports(block):
    from gpurtl.hdl.rt_unit import CyclePorts

    return CyclePorts(block)


def split_params(params):
    """``(rt_unit parameters, ds_bvh_stack parameters)`` of the player's (prefixed ``rt_``,
    ``ds_``)."""
    rt = {k[3:]: v for k, v in params.items() if k.startswith("rt_")}
    ds = {k[3:]: v for k, v in params.items() if k.startswith("ds_")}
    return rt, ds


def build(**params):
    """The :class:`PlayerUnit` of the player's parameters (:func:`split_params`)."""
    rt, ds = split_params(params)
    return PlayerUnit(rt, ds)
