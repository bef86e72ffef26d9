"""The RT unit: node fetch through an L0 vector cache into the ray accelerator."""

from .cycle import CyclePorts, cycle_layouts
from .l0_cache import L0Cache, l0_layouts, l0_signature

__all__ = ["CyclePorts", "L0Cache", "cycle_layouts", "l0_layouts", "l0_signature"]
