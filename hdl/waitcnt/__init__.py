"""Split wait counters (RDNA 4 and earlier) and the memory return queues in front of them."""

from .counters import WaitCounters, counter_layouts
from .memory import WaitcntMemory, memory_layouts
from .return_queue import ReturnQueue

__all__ = ["WaitCounters", "WaitcntMemory", "ReturnQueue", "counter_layouts", "memory_layouts"]
