"""Drive a register allocator's RTL cycle by cycle in the Amaranth simulator (test helper)."""

from amaranth.sim import Simulator

from gpurtl.sim.core import layouts


def idle(**fields):
    tx = {"op": 0, "wave": 0, "count": 0, "lk_wave": 0, "lk_reg": 0}
    tx.update(fields)
    return tx


def run_rtl(dut, in_layout, out_layout, steps, inject=None):
    """Apply the input dictionaries ``steps`` one per cycle; return the output dictionaries.

    ``inject(ctx, cycle, dut)`` (optional) runs before the inputs of each cycle are applied, e.g.
    to corrupt a state register.
    """
    outs = []

    async def bench(ctx):
        for cycle, tx in enumerate(steps):
            if inject is not None:
                inject(ctx, cycle, dut)
            ctx.set(dut.i.as_value(), layouts.pack(in_layout, tx))
            outs.append(layouts.unpack(out_layout, ctx.get(dut.o.as_value())))
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return outs
