"""The traversal runs' pure models, below the tools: the driver's per-wave loop of RT IP 3.1
(:mod:`.loop`, with the LDS stack as the loop sees it, :mod:`.stack`), scenes for it
(:mod:`.scene`), the rays (:mod:`.rays`), whole waves for the CU model (:mod:`.waves`) and the
CU and memory model's calibration, every figure with its source (:mod:`.calibration`).

The traversal loop itself is written once, in :mod:`gpurtl.golden.bvh.wavefront` (millions of
rays at once on array executors); the per-wave loop here is that loop on one wave with scalar
executors (each lane's instructions through the golden instruction models, or through the RTL:
:func:`.loop.wave_program` is the program the RTL runs are driven by).
"""
