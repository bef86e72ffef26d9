"""Golden models and occupancy functions of the register allocators."""
