"""The memory behind the RT unit's L0 as a behavioural memory of a co-simulation session.

:class:`HierarchyMemory` answers the L0's memory requests when
:class:`gpurtl.golden.memory.Hierarchy` built from the levels below L0 (L1, L2, Infinity Cache,
DRAM: by default the RDNA 4 levels of the CU model, :func:`gpurtl.golden.traversal.calibration.rdna4_params`, with the
same latencies, bandwidths and misses in flight) says the line is back. :func:`run_l0` drives the
``l0_cache`` RTL through a session (``docs/session.md``) on any backend that runs cycle-stepped
blocks, every output checked against the golden model as it comes out.

Not an experiment of its own (no ``NAME``): the first piece of the RTL path of the traversal
experiment.
"""

import math

from gpurtl.golden.memory import Hierarchy
from gpurtl.golden.traversal.calibration import rdna4_params

from ...backends import BACKENDS
from ...blocks.rt_unit import MemorySide
from ...core import registry

__all__ = ["HierarchyMemory", "run_l0"]


class HierarchyMemory(MemorySide):
    """A :class:`~gpurtl.sim.blocks.rt_unit.MemorySide` whose answer times come from a memory
    hierarchy model of ``levels`` (the first one below L0; the last DRAM). ``make_line(line)``
    gives a line's data."""

    def __init__(self, levels=None, make_line=None):
        super().__init__(None, p_ready=1.0, make_line=make_line or (lambda line: line))
        self.hierarchy = Hierarchy(levels if levels is not None else rdna4_params().levels[1:])

    def due_cycle(self, line, cycle):
        return math.ceil(self.hierarchy.access(line, cycle))


def run_l0(lines, *, backend="pysim", params=None, memory=None, max_cycles=10**6):
    """Requests for ``lines`` (line indices, ids counting up) through the ``l0_cache`` RTL on
    ``backend``, the response stream always ready, the memory ``memory`` (default: a
    :class:`HierarchyMemory` of the RDNA 4 levels). Returns the cycle count, the lookup results
    the RTL reported, the responses ``(cycle, id, data)`` and the memory's level statistics.
    Raises :class:`~gpurtl.sim.harness.session.MismatchError` at the first output that differs
    from the golden model."""
    block = registry.get("l0_cache")
    values = block.resolve(params or {})
    memory = memory if memory is not None else HierarchyMemory()
    memory.beats = values["beats"]  # the memory sends a line in the L0's beats
    kinds = {"hit": 0, "pending_hit": 0, "miss": 0}
    names = ("hit", "pending_hit", "miss")
    responses, waiting, cycle = [], list(lines), 0
    ids = 1 << values["id_bits"]
    with BACKENDS[backend].session(block, values, golden=True, strict=True) as session:
        while (waiting or len(responses) < len(lines)) and cycle < max_cycles:
            request = None
            if waiting:
                request = {"id": (len(lines) - len(waiting)) % ids, "line": waiting[0]}
            mem_req, fill = memory.inputs(cycle, values["line_bits"])
            inputs = {
                "req": {
                    "valid": int(request is not None),
                    "payload": request or {"id": 0, "line": 0},
                },
                "resp": {"ready": 1},
                "mem_req": mem_req,
                "fill": fill,
            }
            out = session.apply(inputs)
            memory.outputs(cycle, inputs, out)
            if out["event"]["valid"]:
                kinds[names[out["event"]["kind"]]] += 1
                waiting.pop(0)
            if out["resp"]["valid"]:
                payload = out["resp"]["payload"]
                responses.append((cycle, payload["id"], payload["data"]))
            cycle += 1
    return {
        "cycles": cycle,
        "lookups": kinds,
        "responses": responses,
        "levels": memory.hierarchy.stats(),
    }
