"""The traversal runs' pure models, below the tools: the driver's per-wave loop of RT IP 3.1
(:mod:`.loop`, with the LDS stack as the loop sees it, :mod:`.stack`), scenes for it
(:mod:`.scene`), the rays (:mod:`.rays`), whole waves for the CU model (:mod:`.waves`) and the
CU and memory model's calibration, every figure with its source (:mod:`.calibration`).

The wave-batched loop for millions of rays is :mod:`gpurtl.golden.bvh.wavefront`; the per-wave
loop here is its independent reference (one lane at a time through the golden instruction
models) and the program the RTL runs are driven by (:func:`.loop.wave_program`).
"""
