"""The RT unit: node fetch through an L0 vector cache into the ray accelerator."""

from .cycle import CyclePorts, cycle_layouts
from .l0_cache import L0Cache, l0_layouts, l0_signature
from .node_fetch import NodeFetch, fetch_layout, node_fetch_signature

__all__ = [
    "CyclePorts",
    "L0Cache",
    "NodeFetch",
    "cycle_layouts",
    "fetch_layout",
    "l0_layouts",
    "l0_signature",
    "node_fetch_signature",
]
