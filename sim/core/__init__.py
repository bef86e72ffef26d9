"""The lowest layer of the simulation package: the block registry, payload layouts, JSON Lines,
word arrays and Verilog export."""
