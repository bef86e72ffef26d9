"""The RT unit: node fetch through an L0 vector cache into the ray accelerator."""

from .cycle import CyclePorts, cycle_layouts
from .l0_cache import L0Cache, l0_layouts, l0_signature
from .node_fetch import NodeFetch, fetch_layout, node_fetch_signature
from .top import RtUnit, rt_unit_signature

__all__ = [
    "CyclePorts",
    "L0Cache",
    "NodeFetch",
    "RtUnit",
    "cycle_layouts",
    "fetch_layout",
    "l0_layouts",
    "l0_signature",
    "node_fetch_signature",
    "rt_unit_signature",
]
