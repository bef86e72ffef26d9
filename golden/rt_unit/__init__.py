"""Golden models of the RT unit's blocks (:mod:`gpurtl.hdl.rt_unit`)."""

from .l0_cache import HIT, MISS, PENDING, L0CacheModel, cache_geometry
from .node_fetch import NodeFetchModel
from .top import AccelTiming, RtUnitModel

__all__ = [
    "HIT",
    "MISS",
    "PENDING",
    "AccelTiming",
    "L0CacheModel",
    "NodeFetchModel",
    "RtUnitModel",
    "cache_geometry",
]
