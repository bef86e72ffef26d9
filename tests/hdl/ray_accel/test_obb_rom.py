"""The two-level OBB ROM of the RTL against the golden table, for all 128 index values."""

from amaranth.sim import Simulator

from gpurtl.golden.ray_accel.scalar import obb
from gpurtl.hdl.ray_accel.obb_transform import ObbRom


def test_rom_all_indices_all_columns():
    roms = [ObbRom(c) for c in range(3)]
    from amaranth.hdl import Module

    top = Module()
    for c, rom in enumerate(roms):
        top.submodules[f"rom{c}"] = rom
    sim = Simulator(top)
    seen = []

    async def bench(ctx):
        for index in range(128):
            for rom in roms:
                ctx.set(rom.index, index)
            cols = [[ctx.get(rom.value[r].as_value()) for r in range(3)] for rom in roms]
            seen.append((index, cols, [ctx.get(rom.rotate) for rom in roms]))

    sim.add_testbench(bench)
    sim.run()
    for index, cols, rotate in seen:
        assert rotate == [int(index < 104)] * 3
        if index < 104:
            expected = obb.obb_matrix_bits(index)
            got = tuple(tuple(cols[c][r] for c in range(3)) for r in range(3))
            assert got == expected, index
