"""Golden models of the RT unit's blocks (:mod:`gpurtl.hdl.rt_unit`)."""

from .l0_cache import HIT, MISS, PENDING, L0CacheModel, cache_geometry
from .node_fetch import NodeFetchModel

__all__ = ["HIT", "MISS", "PENDING", "L0CacheModel", "NodeFetchModel", "cache_geometry"]
