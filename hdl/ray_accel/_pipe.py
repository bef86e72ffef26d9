"""Small pipeline helpers of the ray accelerator top level (R1): clock-enabled delay lines."""

from amaranth.hdl import Signal, Shape, Value
from amaranth.lib import data

__all__ = ["delay", "reg"]


def reg(m, en, value, name, *, shape=None):
    """``value`` registered once (advances only when ``en``)."""
    if shape is None:
        shape = value.shape() if isinstance(value, data.View) else Value.cast(value).shape()
    r = Signal(shape, name=name)
    with m.If(en):
        m.d.sync += r.eq(value)
    return r


def delay(m, en, value, cycles, name, *, shape=None):
    """``value`` delayed by ``cycles`` enabled clocks (``cycles = 0`` returns it unchanged)."""
    if cycles < 0:
        raise ValueError(f"`cycles` must be a non-negative integer, not {cycles}")
    for k in range(cycles):
        value = reg(m, en, value, f"{name}_d{k + 1}", shape=shape)
    return value
