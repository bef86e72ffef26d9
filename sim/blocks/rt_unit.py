"""Registry entries of the RT unit's blocks: ``l0_cache``, ``node_fetch`` and ``rt_unit``.

The blocks talk to a memory over request and fill streams, so a useful random stimulus has to
answer the block's memory requests. The stimulus generator therefore runs the golden model as it
goes, with a behavioural memory (random latencies, so fills come back out of order) and random
valid/ready stalls on every stream: each producer (the request source, the memory) holds
``valid`` and its payload until the block takes them. The RTL, if it agrees with the golden
model, sees the same outputs, so the inputs stay legal for it too; where it disagrees the
lockstep check reports the first differing cycle.
"""

from gpurtl.facts.waitcnt import profile as waitcnt_profile
from gpurtl.golden.ray_accel.encode.ray import default_desc
from gpurtl.golden.rt_unit import L0CacheModel, NodeFetchModel, RtUnitModel, cache_geometry
from gpurtl.hdl.ray_accel.presets import FP_PRESETS
from gpurtl.hdl.ray_accel.ray_accel import RayAccel, build_paths
from gpurtl.hdl.rt_unit import (
    CyclePorts,
    L0Cache,
    NodeFetch,
    RtUnit,
    cycle_layouts,
    fetch_layout,
    l0_signature,
    node_fetch_signature,
    rt_unit_signature,
)
from gpurtl.hdl.rt_unit.node_fetch import ORDERS

from ..core import layouts
from ..core.registry import Block, Param, component_facts, register
from .ray_accel import _bvh8_node, _ray

_L0 = (
    Param("size", 2048, "bytes (RDNA 4 has 32 KB per CU: see docs/rt_unit.md)", range=(128, 65536)),
    Param("ways", 4, "associativity (power of two)", choices=(1, 2, 4, 8, 16)),
    Param("mshrs", 4, "miss-status registers: lines missing at once", range=(1, 64)),
    Param("targets", 4, "requests merged into one miss register", range=(1, 64)),
    Param("id_bits", 4, "request id width", range=(1, 16)),
    Param("line_bits", 16, "line index width (byte address / 128)", range=(4, 57)),
)


def _l0_validate(size, ways, mshrs, targets, id_bits, line_bits):
    sets = cache_geometry(size, ways)
    if line_bits <= (sets - 1).bit_length():
        raise ValueError(f"`line_bits` must exceed the {sets - 1} set index bits, not {line_bits}")


def _l0_layouts(size, ways, mshrs, targets, id_bits, line_bits):
    return cycle_layouts(l0_signature(id_bits, line_bits))


class MemorySide:
    """Behavioural memory on the request and fill streams of a cache (used by the stimulus and
    the tests): every request is answered when :meth:`due_cycle` says (by default after a random
    latency from ``latencies``), in the order the answers become due; the data of a line is
    ``make_line(line)`` or a fixed random 1024-bit value. ``p_ready`` is the chance that
    ``mem_req.ready`` is high in a cycle, ``p_bogus`` the chance of offering, in a cycle with no
    answer due, a fill that nobody asked for."""

    def __init__(self, rng, latencies=(2, 30), p_ready=0.8, p_bogus=0.0, make_line=None):
        self.rng, self.latencies, self.make_line = rng, latencies, make_line
        self.p_ready, self.p_bogus = p_ready, p_bogus
        self.lines = {}
        self.due = []  # [cycle due, line]
        self.offer = None  # (line, data) held on the fill stream until taken

    def line_data(self, line):
        if line not in self.lines:
            if self.make_line is not None:
                self.lines[line] = self.make_line(line)
            else:
                self.lines[line] = int.from_bytes(self.rng.bytes(128), "little")
        return self.lines[line]

    def inputs(self, cycle, line_bits):
        """This cycle's ``mem_req`` and ``fill`` inputs."""
        if self.offer is None:
            ready = [entry for entry in self.due if entry[0] <= cycle]
            if ready:
                entry = min(ready)
                self.due.remove(entry)
                self.offer = (entry[1], self.line_data(entry[1]))
            elif self.p_bogus and self.rng.random() < self.p_bogus:
                line = int(self.rng.integers(0, 1 << line_bits))
                self.offer = (line, self.line_data(line))
        fill = {"valid": 0, "payload": {"line": 0, "data": 0}}
        if self.offer is not None:
            fill = {"valid": 1, "payload": {"line": self.offer[0], "data": self.offer[1]}}
        ready = 1 if self.p_ready >= 1 else int(self.rng.random() < self.p_ready)
        return {"ready": ready}, fill

    def due_cycle(self, line, cycle):
        """The cycle from which the answer to a request for ``line`` taken at ``cycle`` is
        offered."""
        low, high = self.latencies
        return cycle + int(self.rng.integers(low, high + 1))

    def outputs(self, cycle, inputs, outputs):
        """Take note of this cycle's transfers on ``mem_req`` and ``fill``."""
        if outputs["mem_req"]["valid"] and inputs["mem_req"]["ready"]:
            line = outputs["mem_req"]["payload"]["line"]
            self.due.append([self.due_cycle(line, cycle), line])
        if inputs["fill"]["valid"] and outputs["fill"]["ready"]:
            self.offer = None


def _lines(rng, size, line_bits):
    """A random line source over a working set three times the cache: mostly the working set,
    often the previous line again (pending hits that fill a miss register's target list),
    sometimes a line anywhere."""
    lines = size // 128
    working = [int(x) for x in rng.choice(1 << line_bits, size=min(3 * lines, 1 << line_bits))]
    last = [working[0]]

    def draw():
        roll = rng.random()
        if roll < 0.05:
            last[0] = int(rng.integers(0, 1 << line_bits))
        elif roll >= 0.35:
            last[0] = working[int(rng.integers(len(working)))]
        return last[0]

    return draw


def drive_with_memory(rng, count, model, offer, names, line_bits, make_line=None):
    """Per-cycle inputs of a block with a request stream, a response stream and the L0's memory
    ports, made by running ``model`` (its golden model) against :class:`MemorySide`: requests
    from ``offer()`` held until taken, phases of heavy and light traffic and of long response
    stalls, out-of-order fills, rare fills with no miss pending (misuse). ``names`` are the
    request and response stream names; ``make_line(line)`` gives a line's data (default: random
    bytes)."""
    source, sink = names
    memory = MemorySide(rng, p_bogus=0.01, make_line=make_line)
    cycles, request = [], None
    p_valid = p_ready = 0.8
    for cycle in range(count):
        if cycle % 97 == 0:
            p_valid = float(rng.choice([0.3, 0.8, 1.0]))
            p_ready = float(rng.choice([0.1, 0.7, 1.0]))
        if request is None and rng.random() < p_valid:
            request = offer()
        mem_req, fill = memory.inputs(cycle, line_bits)
        inputs = {
            source: {"valid": int(request is not None), "payload": request or offer.idle},
            sink: {"ready": int(rng.random() < p_ready)},
            "mem_req": mem_req,
            "fill": fill,
        }
        outputs = model.step(inputs)
        memory.outputs(cycle, inputs, outputs)
        if request is not None and outputs[source]["ready"]:
            request = None
        cycles.append(inputs)
    return cycles


def _l0_stimulus(rng, count, size, ways, mshrs, targets, id_bits, line_bits):
    """Per-cycle inputs: see :func:`drive_with_memory`; request ids count up and wrap."""
    params = dict(size=size, ways=ways, mshrs=mshrs, targets=targets)
    params.update(id_bits=id_bits, line_bits=line_bits)
    draw = _lines(rng, size, line_bits)
    next_id = [0]

    def offer():
        next_id[0] = (next_id[0] + 1) % (1 << id_bits)
        return {"id": next_id[0], "line": draw()}

    offer.idle = {"id": 0, "line": 0}
    return drive_with_memory(rng, count, L0CacheModel(**params), offer, ("req", "resp"), line_bits)


def _idle(source, payload, sink, **others):
    """An idle cycle's inputs: nothing offered, nothing ready (what a JSON line leaves out)."""
    return {
        source: {"valid": 0, "payload": payload},
        sink: {"ready": 0},
        "mem_req": {"ready": 0},
        "fill": {"valid": 0, "payload": {"line": 0, "data": 0}},
        **others,
    }


def _l0_defaults(size, ways, mshrs, targets, id_bits, line_bits):
    return _idle("req", {"id": 0, "line": 0}, "resp")


register(
    Block(
        name="l0_cache",
        doc="RT unit L0 vector cache: 128-byte lines, true LRU, MSHRs with merging, "
        "out-of-order responses by id",
        kind="cycle",
        params=_L0,
        build=lambda **p: CyclePorts(L0Cache(**p)),
        golden=lambda **p: L0CacheModel(**p),
        layouts=_l0_layouts,
        stimulus=_l0_stimulus,
        defaults=_l0_defaults,
        validate=_l0_validate,
        check_count=5000,
        small={"size": 1024, "ways": 2, "mshrs": 2, "targets": 2, "line_bits": 8},
    )
)


_FETCH = _L0 + (
    Param("tag_bits", 4, "tag carried with an instruction (the wave)", range=(1, 8)),
    Param(
        "order",
        "wave",
        "output order: wave (in order within a wave, as RDNA 4 returns BVH results) or l0",
        choices=ORDERS,
    ),
)


def _fetch_validate(tag_bits, order, **l0):
    _l0_validate(**l0)


def _fetch_layouts(size, ways, mshrs, targets, id_bits, line_bits, tag_bits, order):
    return cycle_layouts(node_fetch_signature(id_bits, line_bits, tag_bits))


def _fetch_stimulus(rng, count, tag_bits, order, **l0):
    """Per-cycle inputs: instructions with random ray, flags and descriptor bits, a node pointer
    of a random type on a line from :func:`_lines`, now and then the dual form (not fetched:
    ``err.dual``); see :func:`drive_with_memory`."""
    shape = fetch_layout(tag_bits)
    draw = _lines(rng, l0["size"], l0["line_bits"])

    def offer():
        value = layouts.unpack(shape, int.from_bytes(rng.bytes(shape.size // 8 + 1), "little"))
        value["dual"] = int(rng.random() < 0.02)
        value["node_ptr"][0] = (draw() << 4) | int(rng.integers(16))
        return value

    offer.idle = layouts.unpack(shape, 0)
    model = NodeFetchModel(tag_bits=tag_bits, order=order, **l0)
    return drive_with_memory(rng, count, model, offer, ("inst", "out"), l0["line_bits"])


def _fetch_defaults(tag_bits, order, **l0):
    return _idle("inst", layouts.unpack(fetch_layout(tag_bits), 0), "out")


register(
    Block(
        name="node_fetch",
        doc="RT unit node fetch: intersect instructions wait in a ray buffer while their BVH8 "
        "node line comes through the L0; ray_accel instructions out",
        kind="cycle",
        params=_FETCH,
        build=lambda **p: CyclePorts(NodeFetch(**p)),
        golden=lambda **p: NodeFetchModel(**p),
        layouts=_fetch_layouts,
        stimulus=_fetch_stimulus,
        defaults=_fetch_defaults,
        validate=_fetch_validate,
        check_count=3000,
        small={"size": 1024, "ways": 2, "mshrs": 2, "targets": 2, "id_bits": 3, "line_bits": 8},
    )
)


_ACCEL = (
    Param("engines", 1, "ray accelerator: intersection engines", choices=(1, 2)),
    Param("boxes_per_engine", 1, "ray accelerator: box tests per engine", choices=(1, 2, 4, 8)),
    Param("ftz", False, "ray accelerator: flush subnormals in the box path"),
    Param("triangles", False, "ray accelerator: triangle paths"),
    Param("transforms", False, "ray accelerator: OBB and instance transforms"),
    Param("fp", "shallow", "ray accelerator: FP32 core depths", choices=tuple(FP_PRESETS)),
)
_TOP = tuple(p for p in _L0) + (Param("tag_bits", 2, "2 ** tag_bits waves", range=(1, 4)),) + _ACCEL
_ACCEL_NAMES = tuple(p.name for p in _ACCEL)


def _split(params):
    accel = {name: params[name] for name in _ACCEL_NAMES}
    rest = {name: value for name, value in params.items() if name not in _ACCEL_NAMES}
    return rest, accel


def _top_build(**params):
    rest, accel = _split(params)
    return CyclePorts(RtUnit(**rest, **accel))


def _top_golden(**params):
    rest, accel = _split(params)
    groups, latency = component_facts(
        lambda: RayAccel(**accel), lambda d: (d.initiation_interval, d.latency)
    )
    return RtUnitModel(
        **rest,
        accel_groups=groups,
        accel_depth=latency - groups,
        ftz=accel["ftz"],
        paths=build_paths(accel["triangles"], accel["transforms"]),
    )


def _top_validate(**params):
    rest, accel = _split(params)
    _l0_validate(**{k: v for k, v in rest.items() if k != "tag_bits"})
    if accel["engines"] * accel["boxes_per_engine"] not in (1, 2, 4, 8):
        raise ValueError("`engines * boxes_per_engine` must be 1, 2, 4 or 8")


def _top_layouts(size, ways, mshrs, targets, id_bits, line_bits, tag_bits, **accel):
    return cycle_layouts(rt_unit_signature(id_bits, line_bits, tag_bits))


_BVH_WAIT = next(form for form in waitcnt_profile("gfx12").waits if form.name == "s_wait_bvhcnt")


def _top_stimulus(rng, count, **params):
    """Per-cycle inputs: as ``node_fetch``'s, with pointers mostly to box nodes (type 5) under
    the usual descriptor; the memory holds BVH8 box nodes whose boxes lie along one of four
    rays (``ray_accel``'s stimulus), which the instructions mostly carry; and now and then an
    ``s_wait_bvhcnt`` (or a word that is no wait instruction) for a random wave."""
    rest, accel = _split(params)
    tag_bits = rest["tag_bits"]
    shape = fetch_layout(tag_bits)
    l0 = {k: v for k, v in rest.items() if k != "tag_bits"}
    draw = _lines(rng, l0["size"], l0["line_bits"])

    def offer():
        value = layouts.unpack(shape, int.from_bytes(rng.bytes(shape.size // 8 + 1), "little"))
        value["dual"] = int(rng.random() < 0.02)
        kind = 5 if rng.random() < 0.8 else int(rng.integers(16))
        line = draw()
        value["node_ptr"][0] = (line << 4) | kind
        if rng.random() < 0.9:  # the descriptor Mesa programs (random ones are mostly HPB64)
            value["desc"], value["pointer_flags"] = default_desc(), 0
            pick = line if rng.random() < 0.8 else int(rng.integers(len(rays)))
            value["ray"] = rays[pick % len(rays)][0]
        return value

    rays = [_ray(rng) for _ in range(4)]

    def make_line(line):
        _, o, d = rays[line % len(rays)]
        return sum(int(w) << (32 * k) for k, w in enumerate(_bvh8_node(rng, o, d)))

    offer.idle = layouts.unpack(shape, 0)
    model = _top_golden(**params)
    model = _WithWaits(model, rng, tag_bits)
    return drive_with_memory(rng, count, model, offer, ("inst", "out"), l0["line_bits"], make_line)


class _WithWaits:
    """A model wrapper that adds a random ``wait`` input to every cycle's inputs."""

    def __init__(self, model, rng, tag_bits):
        self.model, self.rng, self.tag_bits = model, rng, tag_bits

    def step(self, inputs):
        roll = self.rng.random()
        word = _BVH_WAIT.encode(bvh=int(self.rng.integers(8)))
        if roll < 0.01:
            word = int(self.rng.integers(0, 2**32))
        inputs["wait"] = {
            "valid": int(roll < 0.05),
            "wave": int(self.rng.integers(1 << self.tag_bits)),
            "word": word,
        }
        return self.model.step(inputs)


def _top_defaults(tag_bits, **params):
    wait = {"valid": 0, "wave": 0, "word": 0}
    return _idle("inst", layouts.unpack(fetch_layout(tag_bits), 0), "out", wait=wait)


register(
    Block(
        name="rt_unit",
        doc="RT unit: node fetch through the L0, the ray accelerator, results in wave order, "
        "per-wave bvhcnt",
        kind="cycle",
        params=_TOP,
        build=_top_build,
        golden=_top_golden,
        layouts=_top_layouts,
        stimulus=_top_stimulus,
        defaults=_top_defaults,
        validate=_top_validate,
        check_count=600,
        small={"size": 1024, "ways": 2, "mshrs": 2, "targets": 2, "id_bits": 3, "line_bits": 8},
    )
)
