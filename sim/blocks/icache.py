"""Registry entry of the instruction cache: ``icache``.

The stimulus runs the golden model as it goes, against the behavioural memory of the RT unit's
caches (:class:`~gpurtl.sim.blocks.rt_unit.MemorySide`: random latencies, out-of-order fills,
rare fills nobody asked for), with random valid/ready stalls on every stream; each producer holds
``valid`` and its payload until the block takes them.
"""

from gpurtl.facts.inst_prefetch import MAX_DISTANCE, ICacheGeometry
from gpurtl.golden.icache import ICacheModel
from gpurtl.hdl.icache import ICache, icache_signature
from gpurtl.hdl.rt_unit import CyclePorts, cycle_layouts

from ..core.registry import Block, Param, register
from .rt_unit import MemorySide

_G = ICacheGeometry()
_PARAMS = (
    Param(
        "size", _G.size, "bytes (an RDNA WGP has 32 KB: docs/inst_prefetch.md)", range=(128, 65536)
    ),
    Param("ways", _G.ways, "associativity (power of two)", choices=(1, 2, 4, 8)),
    Param("mshrs", _G.mshrs, "lines missing at once (fetches and prefetches)", range=(1, 16)),
    Param("line_bits", _G.line_bits, "line index width (byte address / 128)", range=(4, 32)),
    Param(
        "entry_lines",
        _G.entry_lines,
        "kernel-entry prefetch limit in lines (64 RDNA 3, 256 RDNA 4)",
        range=(1, 256),
    ),
)
_SMALL = {"size": 1024, "ways": 2, "mshrs": 2, "line_bits": 8, "entry_lines": 8}


def _geometry(params):
    return ICacheGeometry(**params)


def _validate(**params):
    _geometry(params)


def _layouts(**params):
    return cycle_layouts(icache_signature(_geometry(params)))


def _idle():
    return {
        "fetch": {"valid": 0, "payload": {"pc": 0}},
        "resp": {"ready": 0},
        "start": {"valid": 0, "payload": {"line": 0, "lines": 0}},
        "pf": {"valid": 0, "payload": {"line": 0, "count": 0}},
        "distance": 0,
        "mem_req": {"ready": 0},
        "fill": {"valid": 0, "payload": {"line": 0, "data": 0}},
    }


def drive(rng, count, params, model=None, memory=None):
    """Per-cycle inputs from a random program run against ``model`` (default: the golden model)
    and ``memory`` (default: a :class:`MemorySide` with 2-30 cycle latencies and rare stray
    fills): fetches walk forward 4 or 8 bytes at a time over a code region three times the cache
    with a branch now and then; kernel-entry requests (sometimes more lines than
    ``entry_lines``), ``s_prefetch_inst`` requests (often at the next branch target) and
    distance changes come at random; phases of heavy and light traffic and of stalled
    responses."""
    g = _geometry(params)
    model = model if model is not None else ICacheModel(g)
    memory = memory if memory is not None else MemorySide(rng, p_bogus=0.01)
    code_lines = min(3 * g.size // 128, 1 << g.line_bits)
    base = int(rng.integers(0, 1 << g.line_bits))
    mask = (1 << g.pc_bits) - 1
    pc = [base << 7]
    target = [pc[0]]
    fetch = start = pf = None
    distance = int(rng.integers(0, MAX_DISTANCE + 1))
    p_fetch = p_ready = 0.8
    cycles = []
    for cycle in range(count):
        if cycle % 89 == 0:
            p_fetch = float(rng.choice([0.3, 0.8, 1.0]))
            p_ready = float(rng.choice([0.1, 0.7, 1.0]))
        if fetch is None and rng.random() < p_fetch:
            fetch = {"pc": pc[0]}
            if rng.random() < 0.06:  # a taken branch
                pc[0] = target[0]
                line = (base + int(rng.integers(0, code_lines))) % (1 << g.line_bits)
                target[0] = (line << 7) | (int(rng.integers(0, 32)) << 2)
            else:
                pc[0] = (pc[0] + int(rng.choice([4, 8]))) & mask
        if start is None and rng.random() < 0.004:
            roll, most = rng.random(), (1 << g.entry_bits) - 1
            if roll < 0.2:  # more than the block takes: clamped to entry_lines
                lines = int(rng.integers(min(g.entry_lines + 1, most), most + 1))
            elif roll < 0.5:
                lines = int(rng.integers(0, g.entry_lines + 1))
            else:
                lines = int(rng.integers(0, 5))
            start = {"line": (pc[0] >> 7) & ((1 << g.line_bits) - 1), "lines": lines}
        if pf is None and rng.random() < 0.02:
            line = target[0] >> 7 if rng.random() < 0.7 else int(rng.integers(0, 1 << g.line_bits))
            pf = {"line": line, "count": int(rng.integers(0, 32)) if rng.random() < 0.3 else 0}
        if rng.random() < 0.01:
            distance = int(rng.integers(0, MAX_DISTANCE + 1))
        mem_req, fill = memory.inputs(cycle, g.line_bits)
        idle = _idle()
        inputs = {
            "fetch": {
                "valid": int(fetch is not None),
                "payload": fetch or idle["fetch"]["payload"],
            },
            "resp": {"ready": int(rng.random() < p_ready)},
            "start": {
                "valid": int(start is not None),
                "payload": start or idle["start"]["payload"],
            },
            "pf": {"valid": int(pf is not None), "payload": pf or idle["pf"]["payload"]},
            "distance": distance,
            "mem_req": mem_req,
            "fill": fill,
        }
        outputs = model.step(inputs)
        memory.outputs(cycle, inputs, outputs)
        if fetch is not None and outputs["fetch"]["ready"]:
            fetch = None
        if start is not None and outputs["start"]["ready"]:
            start = None
        if pf is not None and outputs["pf"]["ready"]:
            pf = None
        cycles.append(inputs)
    return cycles


def _stimulus(rng, count, **params):
    return drive(rng, count, params)


register(
    Block(
        name="icache",
        doc="instruction cache: 128-byte lines, true LRU, a fetch port, kernel-entry, sequential "
        "and s_prefetch_inst prefetch, misses to a memory port",
        kind="cycle",
        params=_PARAMS,
        build=lambda **p: CyclePorts(ICache(_geometry(p))),
        golden=lambda **p: ICacheModel(_geometry(p)),
        layouts=_layouts,
        stimulus=_stimulus,
        defaults=lambda **p: _idle(),
        validate=_validate,
        check_count=4000,
        small=_SMALL,
    )
)
