"""Golden (bit-exact Python) models of the RDNA 4 (RT IP 3.1) ray accelerator.

The layouts and constants they share with the RTL live in :mod:`gpurtl.facts.ray_accel`.
"""
