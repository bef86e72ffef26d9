"""Cycle-stepped golden model of the launch-time contiguous first-fit allocators (RDNA static
VGPRs, Xe3 GRF blocks and the older fixed Intel modes); geometry in
:mod:`gpurtl.facts.vgpr_alloc`.

``LAUNCH`` with ``count`` registers takes ``config.need(count)`` contiguous units at the lowest
unit where they fit (first fit); ``ack = 0`` with no error when no hole is large enough (the
dispatcher retries later). ``END`` frees the wave's units. ``ALLOC`` is ``BAD_OP``: these
allocators never change an allocation mid-wave.
"""

from gpurtl.facts.vgpr_alloc import rdna_static_config, xe_config

from .common import ERR, OP, as_op

__all__ = ["ContigModel", "static_model", "xe_model"]


class ContigModel:
    """Golden model with ``step(inputs) -> outputs``; ``config`` is a
    :class:`~gpurtl.facts.vgpr_alloc.ContigConfig`."""

    def __init__(self, config, assertions=True):
        self.cfg, self.assertions = config, assertions
        self.owner = [None] * config.units
        self.base = [0] * config.slots
        self.units = [0] * config.slots

    @property
    def free(self):
        return self.owner.count(None)

    def first_fit(self, need):
        run = 0
        for u, o in enumerate(self.owner):
            run = run + 1 if o is None else 0
            if run == need:
                return u - need + 1
        return None

    def translate(self, wave, reg):
        cfg = self.cfg
        if (
            wave >= cfg.slots
            or self.units[wave] == 0
            or reg >= self.units[wave] * cfg.regs_per_unit
        ):
            return False, 0
        return True, self.base[wave] * cfg.unit_rows + reg * cfg.row_stride

    def step(self, inputs):
        cfg = self.cfg
        op, w, count = as_op(inputs["op"]), inputs["wave"], inputs["count"]
        valid, row = self.translate(inputs["lk_wave"], inputs["lk_reg"])
        out = {
            "ack": 0,
            "err": ERR.NONE,
            "free": self.free,
            "units": list(self.units),
            "lk_valid": int(valid),
            "lk_row": row,
        }
        if op == OP.NONE:
            pass
        elif w >= cfg.slots:
            out["err"] = ERR.BAD_SLOT
        elif op == OP.ALLOC:
            out["err"] = ERR.BAD_OP
        elif op == OP.LAUNCH:
            need = cfg.need(count)
            if self.units[w]:
                out["err"] = ERR.SLOT_BUSY
            elif need is None:
                out["err"] = ERR.OVER_MAX
            else:
                base = self.first_fit(need)
                if base is not None:
                    for u in range(base, base + need):
                        self.owner[u] = w
                    self.base[w], self.units[w] = base, need
                    out["ack"] = 1
        else:  # END
            if not self.units[w]:
                out["err"] = ERR.NOT_RESIDENT
            else:
                self.owner = [None if o == w else o for o in self.owner]
                self.units[w] = 0
                out["ack"] = 1
        self.check()
        return out

    def check(self):
        if not self.assertions:
            return
        cfg = self.cfg
        expect = [None] * cfg.units
        for w in range(cfg.slots):
            n = self.units[w]
            assert 0 <= n <= cfg.max_units, f"slot {w} holds {n} units"
            for u in range(self.base[w], self.base[w] + n):
                assert u < cfg.units and expect[u] is None, "a unit is owned twice"
                expect[u] = w
        assert expect == self.owner, "owner map and per-slot ranges disagree"
        assert self.free + sum(self.units) == cfg.units


def static_model(rf_vgprs=1536, wave64=False, assertions=True):
    return ContigModel(rdna_static_config(rf_vgprs, wave64), assertions)


def xe_model(mode="xe3", assertions=True):
    return ContigModel(xe_config(mode), assertions)
