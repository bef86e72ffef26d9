"""Pipeline-register placement for the matrix core's datapath (a local helper).

A datapath is written as a chain of segments; between two segments the code calls
:meth:`Stager.cut` with the values that cross the boundary (a dictionary of names to values, or
lists of values). ``stages`` of the ``cuts`` boundaries get a register bank, clocked by one enable;
the rest pass the values through. :meth:`Stager.cut` returns the same structure, registered or not,
so the code of every segment is the same at any depth, and ``latency == stages``.
"""

from amaranth.hdl import Shape, Signal

__all__ = ["Stager", "place"]


def place(cuts, stages):
    """The boundaries (0 .. cuts-1) that get a register: spread evenly, the last always first."""
    if not isinstance(stages, int) or isinstance(stages, bool) or not 0 <= stages <= cuts:
        raise ValueError(f"`stages` must be an integer from 0 to {cuts}, not {stages!r}")
    return {cuts - 1 - (i * cuts) // stages for i in range(stages)}


class Stager:
    """Registers ``stages`` of ``cuts`` boundaries of a datapath under ``m`` with enable ``en``."""

    def __init__(self, m, en, cuts, stages, prefix="s"):
        self.m, self.en, self.prefix = m, en, prefix
        self.chosen = place(cuts, stages)
        self.cuts, self.index = cuts, 0

    @property
    def done(self):
        return self.index == self.cuts

    def cut(self, **values):
        """Pass ``values`` over the next boundary (registered if it was chosen)."""
        if self.index >= self.cuts:
            raise RuntimeError("more cuts than declared")
        register = self.index in self.chosen
        tag = f"{self.prefix}{self.index}"
        self.index += 1
        if not register:
            return _Bundle(values)
        return _Bundle({name: self._reg(f"{tag}_{name}", v) for name, v in values.items()})

    def _reg(self, name, value):
        if isinstance(value, (list, tuple)):
            return [self._reg(f"{name}_{i}", v) for i, v in enumerate(value)]
        shape = value.shape() if hasattr(value, "shape") else Shape.cast(value)
        reg = Signal(shape, name=name)
        with self.m.If(self.en):
            self.m.d.sync += reg.eq(value)
        return reg


class _Bundle(dict):
    __getattr__ = dict.__getitem__
