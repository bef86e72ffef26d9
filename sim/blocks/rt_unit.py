"""Registry entries of the RT unit's blocks: ``l0_cache``, ``node_fetch`` and ``rt_unit``.

The blocks talk to a memory over request and fill streams, so a useful random stimulus has to
answer the block's memory requests. The stimulus generator therefore runs the golden model as it
goes, with a behavioural memory (random latencies, so fills come back out of order) and random
valid/ready stalls on every stream: each producer (the request source, the memory) holds
``valid`` and its payload until the block takes them. The RTL, if it agrees with the golden
model, sees the same outputs, so the inputs stay legal for it too; where it disagrees the
lockstep check reports the first differing cycle.
"""

from gpurtl.facts.ray_accel import FIELD_NOTES
from gpurtl.facts.rt_unit import (
    DUAL_EMPTY_PTR,
    FETCH_ORDER,
    FETCH_TAG_BITS,
    MAX_BEATS,
    MAX_WAVE_TAG_BITS,
    ORDERS,
    PRESETS,
    REPLACEMENTS,
    WAVE_TAG_BITS,
    L0Geometry,
)
from gpurtl.facts.waitcnt import profile as waitcnt_profile
from gpurtl.golden.ray_accel.encode.ray import default_desc
from gpurtl.golden.rt_unit import L0CacheModel, NodeFetchModel, RtUnitModel
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

from ..core import layouts
from ..core.registry import Block, Param, component_facts, register
from .ray_accel import _bvh8_node, _ray

_G = L0Geometry()
_BEATS = tuple(1 << k for k in range(MAX_BEATS.bit_length()))
#: The L0 geometry's parameters (the fields of :class:`L0Geometry`, defaults from there), shared
#: by the three blocks.
_L0 = (
    Param(
        "size",
        _G.size,
        "bytes (RDNA 4 has 32 KB per CU: see docs/rt_unit.md)",
        range=(128, 65536),
        rule="128 x ways x a power of two (128-byte lines, a power-of-two number of sets)",
    ),
    Param("ways", _G.ways, "associativity (power of two)", choices=(1, 2, 4, 8, 16)),
    Param("mshrs", _G.mshrs, "miss-status registers: lines missing at once", range=(1, 64)),
    Param("targets", _G.targets, "requests merged into one miss register", range=(1, 64)),
    Param("id_bits", _G.id_bits, "request id width", range=(1, 16)),
    Param("line_bits", _G.line_bits, "line index width (byte address / 128)", range=(4, 57)),
    Param(
        "replacement",
        _G.replacement,
        "replacement: true LRU or tree pseudo-LRU (ways - 1 bits a set)",
        choices=REPLACEMENTS,
    ),
    Param("beats", _G.beats, "fill transfers per line, 1024 / beats bits each", choices=_BEATS),
    Param(
        "hints",
        _G.hints,
        "L0 requests carry a GFX12 temporal hint and scope (the node fetch sends TH_RT, SCOPE_CU)",
    ),
)
#: The small build of all three blocks (``Block.small``: the smoke tests' variant).
_SMALL = {"size": 1024, "ways": 2, "mshrs": 2, "targets": 2, "line_bits": 8}


def _validate(**params):
    """Every block's check: the geometry builds (``L0Geometry`` raises ValueError otherwise)."""
    L0Geometry.split(params)


def _l0_layouts(**params):
    return cycle_layouts(l0_signature(L0Geometry.split(params)[0]))


class MemorySide:
    """Behavioural memory on the request and fill streams of a cache (used by the stimulus and
    the tests): every request is answered when :meth:`due_cycle` says (by default after a random
    latency from ``latencies``), in the order the answers become due; the data of a line is
    ``make_line(line)`` or a fixed random 1024-bit value. ``p_ready`` is the chance that
    ``mem_req.ready`` is high in a cycle, ``p_bogus`` the chance of offering, in a cycle with no
    answer due, a fill that nobody asked for. A line goes out as ``beats`` transfers, low bits
    first, each beat held until taken, with a pause of a cycle now and then between beats (not
    with ``rng`` None)."""

    def __init__(self, rng, latencies=(2, 30), p_ready=0.8, p_bogus=0.0, make_line=None, beats=1):
        self.rng, self.latencies, self.make_line = rng, latencies, make_line
        self.p_ready, self.p_bogus, self.beats = p_ready, p_bogus, beats
        self.lines = {}
        self.due = []  # [cycle due, line]
        self.offer = None  # (line, data) held on the fill stream until its last beat is taken
        self.beat = 0

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
        if self.beat and self.rng is not None and self.rng.random() < 0.2:
            return {"ready": self._ready()}, fill  # a pause between two beats of a line
        if self.offer is not None:
            width = 1024 // self.beats
            data = (self.offer[1] >> (self.beat * width)) & ((1 << width) - 1)
            fill = {"valid": 1, "payload": {"line": self.offer[0], "data": data}}
        return {"ready": self._ready()}, fill

    def _ready(self):
        return 1 if self.p_ready >= 1 else int(self.rng.random() < self.p_ready)

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
            self.beat = (self.beat + 1) % self.beats
            if self.beat == 0:
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


def drive_with_memory(rng, count, model, offer, names, line_bits, make_line=None, beats=1):
    """Per-cycle inputs of a block with a request stream, a response stream and the L0's memory
    ports, made by running ``model`` (its golden model) against :class:`MemorySide`: requests
    from ``offer()`` held until taken, phases of heavy and light traffic and of long response
    stalls, out-of-order fills, rare fills with no miss pending (misuse). ``names`` are the
    request and response stream names; ``make_line(line)`` gives a line's data (default: random
    bytes); ``beats`` is the L0's."""
    source, sink = names
    memory = MemorySide(rng, p_bogus=0.01, make_line=make_line, beats=beats)
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


def _l0_stimulus(rng, count, **params):
    """Per-cycle inputs: see :func:`drive_with_memory`; request ids count up and wrap."""
    g = L0Geometry(**params)
    draw = _lines(rng, g.size, g.line_bits)
    next_id = [0]

    def offer():
        next_id[0] = (next_id[0] + 1) % (1 << g.id_bits)
        request = {"id": next_id[0], "line": draw()}
        if g.hints:
            request.update(_random_hint(rng))
        return request

    offer.idle = _l0_idle(g)
    model = L0CacheModel(g)
    return drive_with_memory(rng, count, model, offer, ("req", "resp"), g.line_bits, beats=g.beats)


def _idle(source, payload, sink, **others):
    """An idle cycle's inputs: nothing offered, nothing ready (what a JSON line leaves out)."""
    return {
        source: {"valid": 0, "payload": payload},
        sink: {"ready": 0},
        "mem_req": {"ready": 0},
        "fill": {"valid": 0, "payload": {"line": 0, "data": 0}},
        **others,
    }


def _random_hint(rng):
    """A random load hint and scope: half the requests regular at CU scope, the others any
    hint (the reserved 7 too) and now and then a wider scope."""
    if rng.random() < 0.5:
        return {"th": 0, "scope": 0}
    scope = int(rng.integers(1, 4)) if rng.random() < 0.15 else 0
    return {"th": int(rng.integers(0, 8)), "scope": scope}


def _l0_idle(g):
    """The idle request payload of L0 geometry ``g``."""
    return {"id": 0, "line": 0, **({"th": 0, "scope": 0} if g.hints else {})}


def _l0_defaults(**params):
    return _idle("req", _l0_idle(L0Geometry.split(params)[0]), "resp")


register(
    Block(
        name="l0_cache",
        doc="RT unit L0 vector cache: 128-byte lines, true LRU or tree pseudo-LRU, MSHRs with merging, "
        "out-of-order responses by id, optional GFX12 temporal hints and scope",
        kind="cycle",
        params=_L0,
        build=lambda **p: CyclePorts(L0Cache(**p)),
        golden=lambda **p: L0CacheModel(**p),
        layouts=_l0_layouts,
        stimulus=_l0_stimulus,
        defaults=_l0_defaults,
        validate=_validate,
        check_count=5000,
        small=_SMALL,
    )
)


_FETCH = _L0 + (
    Param("tag_bits", FETCH_TAG_BITS, "tag carried with an instruction (the wave)", range=(1, 8)),
    Param(
        "order",
        FETCH_ORDER,
        "output order: wave (in order within a wave, as RDNA 4 returns BVH results) or l0",
        choices=ORDERS,
    ),
    Param(
        "dual",
        False,
        "fetch the dual form's two legacy nodes (image_bvh_dual_intersect_ray, order wave); "
        "off: err.dual",
    ),
)


def _fetch_validate(**params):
    _validate(**params)
    if params["dual"] and params["order"] != "wave":
        raise ValueError('`dual` needs order "wave"')


def _fetch_layouts(tag_bits, order, dual, **l0):
    return cycle_layouts(node_fetch_signature(L0Geometry(**l0), tag_bits))


def _dual_pointers(rng, value, draw):
    """The dual build's stimulus: most instructions in the dual form, the second node the empty
    one, in the first node's line, or on a line of its own (a random legacy type each)."""
    value["dual"] = int(rng.random() < 0.6)
    roll = rng.random()
    if roll < 0.2:
        value["node_ptr"][1] = DUAL_EMPTY_PTR
    elif roll < 0.35:
        value["node_ptr"][1] = (value["node_ptr"][0] & ~0xF) | int(rng.integers(16))
    else:
        value["node_ptr"][1] = (draw() << 4) | int(rng.integers(16))


def _fetch_stimulus(rng, count, tag_bits, order, dual=False, **l0):
    """Per-cycle inputs: instructions with random ray, flags and descriptor bits, a node pointer
    of a random type on a line from :func:`_lines`, now and then the dual form (not fetched:
    ``err.dual``), most of the time with ``dual`` (:func:`_dual_pointers`); see
    :func:`drive_with_memory`."""
    shape = fetch_layout(tag_bits)
    g = L0Geometry(**l0)
    draw = _lines(rng, g.size, g.line_bits)

    def offer():
        value = layouts.unpack(shape, int.from_bytes(rng.bytes(shape.size // 8 + 1), "little"))
        value["dual"] = int(rng.random() < 0.02)
        value["node_ptr"][0] = (draw() << 4) | int(rng.integers(16))
        if dual:
            _dual_pointers(rng, value, draw)
        return value

    offer.idle = layouts.unpack(shape, 0)
    model = NodeFetchModel(g, tag_bits, order, dual)
    return drive_with_memory(rng, count, model, offer, ("inst", "out"), g.line_bits, beats=g.beats)


def _fetch_defaults(tag_bits, order, dual, **l0):
    return _idle("inst", layouts.unpack(fetch_layout(tag_bits), 0), "out")


register(
    Block(
        name="node_fetch",
        notes=lambda **_: FIELD_NOTES,
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
        small=dict(_SMALL, id_bits=3),
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
_TOP = (
    _L0
    + (Param("tag_bits", WAVE_TAG_BITS, "2 ** tag_bits waves", range=(1, MAX_WAVE_TAG_BITS)),)
    + _ACCEL
    + (
        Param(
            "preset",
            "none",
            "named build: rdna4 (32 KB L0, 32 waves, 2 engines x 4 boxes with the triangle "
            "paths; docs/rt_unit.md); other parameters given apply over it",
            choices=tuple(PRESETS),
        ),
        Param(
            "dual",
            False,
            "node fetch: fetch the dual form's two legacy nodes (BVH4x2); off: err.dual",
        ),
    )
)
_ACCEL_NAMES = tuple(p.name for p in _ACCEL)


def _split(params):
    """``(geometry, tag_bits, accelerator build)`` of the ``rt_unit`` parameters (``preset``
    is already applied by the registry; ``dual`` is read by the callers)."""
    params = {k: v for k, v in params.items() if k not in ("preset", "dual")}
    geometry, rest = L0Geometry.split(params)
    accel = {name: rest[name] for name in _ACCEL_NAMES}
    return geometry, rest["tag_bits"], accel


def _top_build(**params):
    geometry, tag_bits, accel = _split(params)
    return CyclePorts(RtUnit(geometry, tag_bits, **accel, dual=params.get("dual", False)))


def top_golden(**params):
    """The golden :class:`~gpurtl.golden.rt_unit.RtUnitModel` of an ``rt_unit`` parameter
    dictionary (its accelerator's timing read from the RTL build)."""
    geometry, tag_bits, accel = _split(params)
    groups, latency = component_facts(
        lambda: RayAccel(**accel), lambda d: (d.initiation_interval, d.latency)
    )
    return RtUnitModel(
        geometry,
        tag_bits,
        accel_groups=groups,
        accel_depth=latency - groups,
        ftz=accel["ftz"],
        paths=build_paths(accel["triangles"], accel["transforms"]),
        dual=params.get("dual", False),
    )


def _top_validate(**params):
    _, _, accel = _split(params)
    if accel["engines"] * accel["boxes_per_engine"] not in (1, 2, 4, 8):
        raise ValueError("`engines * boxes_per_engine` must be 1, 2, 4 or 8")


def _top_layouts(**params):
    geometry, tag_bits, _ = _split(params)
    return cycle_layouts(rt_unit_signature(geometry, tag_bits))


_BVH_WAIT = next(form for form in waitcnt_profile("gfx12").waits if form.name == "s_wait_bvhcnt")


def _top_stimulus(rng, count, **params):
    """Per-cycle inputs: as ``node_fetch``'s, with pointers mostly to box nodes (type 5) under
    the usual descriptor; the memory holds BVH8 box nodes whose boxes lie along one of four
    rays (``ray_accel``'s stimulus), which the instructions mostly carry; and now and then an
    ``s_wait_bvhcnt`` (or a word that is no wait instruction) for a random wave.

    Lanes come as wave instructions of 1..32 lanes (often one, so a wave reaches its
    ``bvhcnt`` limit within the ray buffer's slots), ``last`` set on the final lane; mostly a
    wave's lanes and instructions follow each other, sometimes another wave's come in between."""
    g, tag_bits, _ = _split(params)
    dual = params.get("dual", False)
    shape = fetch_layout(tag_bits)
    draw = _lines(rng, g.size, g.line_bits)
    left = [0] * (1 << tag_bits)  # lanes still to come of each wave's instruction
    current = [0]

    def lane():
        """``(wave, last)`` of the next lane."""
        wave = current[0]
        if rng.random() < (0.3 if left[wave] == 0 else 0.1):
            wave = current[0] = int(rng.integers(1 << tag_bits))
        if left[wave] == 0:
            roll = rng.random()
            left[wave] = 1 if roll < 0.5 else int(rng.integers(2, 5 if roll < 0.75 else 33))
        left[wave] -= 1
        return wave, int(left[wave] == 0)

    def offer():
        value = layouts.unpack(shape, int.from_bytes(rng.bytes(shape.size // 8 + 1), "little"))
        value["tag"], value["last"] = lane()
        value["dual"] = int(rng.random() < 0.02)
        kind = 5 if rng.random() < 0.8 else int(rng.integers(16))
        line = draw()
        value["node_ptr"][0] = (line << 4) | kind
        if dual:
            _dual_pointers(rng, value, draw)
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
    model = top_golden(**params)
    model = _WithWaits(model, rng, tag_bits)
    names = ("inst", "out")
    return drive_with_memory(rng, count, model, offer, names, g.line_bits, make_line, g.beats)


def memory_image(rng, pool=16, **params):
    """The node data of the compiled ``rt_unit`` stimulus (``stimulus/rt_unit.h`` of the fast
    backend), made as :func:`_top_stimulus` makes them: ``(rays, working, data, pool_data)``,
    the four rays (dictionaries of the ``ray`` field), the working set's line indices (as
    :func:`_lines` draws them, each once), their BVH8 box nodes (``(len(working), 32)`` dwords,
    boxes along ray ``line % 4``) and ``pool`` more nodes per ray (``(4, pool, 32)``), the data
    of any other line (a line outside the working set, drawn now and then, shares a node of
    the pool with lines of the same ray; a CHOICE, so the image stays small for any
    ``line_bits``)."""
    g, _, _ = _split(params)
    rays = [_ray(rng) for _ in range(4)]
    lines = g.size // 128
    drawn = rng.choice(1 << g.line_bits, size=min(3 * lines, 1 << g.line_bits))
    working = list(dict.fromkeys(int(x) for x in drawn))
    data = [_bvh8_node(rng, rays[line % 4][1], rays[line % 4][2]) for line in working]
    pool_data = [[_bvh8_node(rng, o, d) for _ in range(pool)] for _, o, d in rays]
    return [r[0] for r in rays], working, data, pool_data


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
        notes=lambda **_: FIELD_NOTES,
        doc="RT unit: node fetch through the L0, the ray accelerator, results in wave order, "
        "per-wave bvhcnt",
        kind="cycle",
        params=_TOP,
        build=_top_build,
        golden=top_golden,
        layouts=_top_layouts,
        stimulus=_top_stimulus,
        defaults=_top_defaults,
        validate=_top_validate,
        check_count=600,
        small=dict(_SMALL, id_bits=3),
        presets=PRESETS,
    )
)
