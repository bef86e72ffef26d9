"""Drive a register allocator's RTL cycle by cycle in a pysim session (test helper)."""

from gpurtl.sim.backends import BACKENDS
from gpurtl.sim.core.registry import Block


def idle(**fields):
    tx = {"op": 0, "wave": 0, "count": 0, "lk_wave": 0, "lk_reg": 0}
    tx.update(fields)
    return tx


def run_rtl(dut, in_layout, out_layout, steps, inject=None):
    """Apply the input dictionaries ``steps`` one per cycle; return the output dictionaries.

    ``inject(ctx, cycle, dut)`` (optional) runs before the inputs of each cycle are applied, e.g.
    to corrupt a state register.
    """
    block = Block(
        name="dut",
        doc="an allocator built by a test",
        kind="cycle",
        build=lambda: dut,
        golden=None,
        layouts=lambda: (in_layout, out_layout),
        stimulus=None,
    )
    with BACKENDS["pysim"].session(block, {}, golden=False) as session:
        if inject is not None:
            session.before_cycle = lambda ctx, cycle: inject(ctx, cycle, dut)
        return session.apply_all(steps)
