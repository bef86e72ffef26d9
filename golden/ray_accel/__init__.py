"""Golden (bit-exact Python) models of the RDNA 4 (RT IP 3.1) ray accelerator.

Shared layouts live in :mod:`gpurtl.golden.ray_accel.ray`; see /work/shared/spec/rdna4_ray_accelerator.md.
"""
