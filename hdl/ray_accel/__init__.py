"""Amaranth RTL of the RDNA 4 (RT IP 3.1) ray accelerator (box engines, triangle engine, OBB and
instance transforms, sort unit and the top level ``RayAccel``)."""
