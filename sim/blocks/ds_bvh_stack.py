"""Registry entry of the LDS BVH stack block ``ds_bvh_stack``.

The stimulus plays traversals: a handful of lanes, each carrying the register its previous
instruction returned (a private golden model runs alongside to know it), so the stacks in the LDS
evolve across transactions, often back to back on the same lane. Instructions come in the shapes
a traversal loop issues: sorted box results (pointers first, ``INVALID_NODE`` after, sometimes a
skip value), instance results (``SKIP_0_7`` then the BLAS root), primitive-range updates after a
triangle pair, walk-backs after an ``INVALID_NODE`` pop, PUSH8_POP2 with triangle pairs, the
RDNA 3 push4 form, and a few misuses (registers outside the LDS, unknown opcodes).
"""

from gpurtl.facts.ds_bvh_stack import (
    INVALID_NODE,
    PRIM_RANGE_UPDATE,
    SKIP_0_3,
    SKIP_0_7,
    SKIP_4_7,
    STACK_REQUEST_LAYOUT,
    STACK_RESPONSE_LAYOUT,
    TERMINAL_NODE,
    StackOp,
)
from gpurtl.golden.ray_accel.ds_bvh_stack import BvhStackModel, unpack_stack_addr

from ..core.registry import Block, Param, register

_TRI_TYPES = (0, 1, 2, 3, 8, 9, 10, 11)


def _pointer(rng, kind):
    offset = int(rng.integers(1, 1 << 24)) << 4
    if kind == "box":
        return offset | 5
    if kind == "instance":
        return offset | 6
    return offset | int(rng.choice(_TRI_TYPES))


def _children(rng, hits):
    """A sorted intersection result: ``hits`` pointers (triangles first), INVALID after."""
    kinds = rng.choice(["box", "box", "box", "tri", "instance"], size=hits)
    nodes = sorted((_pointer(rng, str(k)) for k in kinds), key=lambda p: (p & 7) > 3)
    data = nodes + [INVALID_NODE] * (8 - hits)
    if rng.random() < 0.12:
        data[int(rng.integers(0, 8))] = int(rng.choice([SKIP_0_3, SKIP_4_7, SKIP_0_7]))
    return data


class _Lane:
    def __init__(self, model, wave, lane):
        self.base = model.base_of(wave, lane)
        self.reset()

    def reset(self):
        self.reg = {
            "valid_entries": 0,
            "entries_to_tlas": 0,
            "addr": 0,
            "base": self.base,
            "has_tlas": 0,
            "has_overflowed": 0,
            "blas2tlas_pop": 0,
        }
        self.popped = TERMINAL_NODE
        self.parent = None  # the last box result, for walk-backs


def _request(rng, lane, model):
    """The next instruction of ``lane``, shaped by what its previous instruction popped."""
    op = StackOp.PUSH8_POP1
    roll = rng.random()
    if roll < 0.12:
        op = StackOp.PUSH8_POP2
    elif roll < 0.2:
        op = StackOp.PUSH4_POP1
    popped, last, prim = lane.popped, INVALID_NODE, int(rng.random() < 0.5)
    if popped == INVALID_NODE and lane.parent is not None and rng.random() < 0.8:
        # walk-back: the parent's result again, last = a child visited already (or not there)
        data = list(lane.parent)
        present = [p for p in data if p >> 3 != 0x1FFFFFFF]
        last = int(rng.choice(present)) if present and rng.random() < 0.8 else _pointer(rng, "box")
    elif popped & 7 == 6 and popped >> 3 != 0x1FFFFFFF:
        # an instance node: the intersection returns SKIP_0_7 and the BLAS root
        data = [INVALID_NODE] * 6 + [SKIP_0_7, _pointer(rng, "box")]
    elif (popped & 7) <= 3 and op == StackOp.PUSH8_POP1 and rng.random() < 0.8:
        # after a triangle pair: continue the primitive range
        nav = int(rng.choice([0, 0, 1, 2]))
        last, prim = PRIM_RANGE_UPDATE | nav, 1
        data = (
            _children(rng, int(rng.integers(0, 3)))
            if rng.random() < 0.3
            else [INVALID_NODE] * 7 + [0]
        )
        data[7] = popped
    else:
        hits = int(rng.choice([0, 0, 0, 1, 1, 1, 2, 2, 3, 4, 6, 8]))
        data = _children(rng, hits)
        if op == StackOp.PUSH8_POP2 and rng.random() < 0.5:
            data[0] = (_pointer(rng, "box") & ~0xF) | 1  # a triangle pair first
        lane.parent = data
    request = {
        "op": op,
        "stack_addr": dict(lane.reg),
        "last_node_ptr": last,
        "data": [int(d) for d in data],
        "tri_size_opt": int(rng.random() < 0.1),
        "prim_range": prim,
    }
    misuse = rng.random()
    if misuse < 0.015:
        request["stack_addr"] = unpack_stack_addr(int(rng.integers(0, 1 << 32)))
    elif misuse < 0.02:
        request["op"] = int(rng.choice([0, 223, 227, 255]))
    elif misuse < 0.03:
        request["last_node_ptr"] = int(rng.integers(0, 1 << 32))
    return request


def _stimulus(rng, count, stack_size, waves, lanes):
    model = BvhStackModel(stack_size=stack_size, waves=waves, lanes=lanes)
    pool = [
        _Lane(model, int(rng.integers(0, waves)), int(rng.integers(0, lanes)))
        for _ in range(min(6, waves * lanes))
    ]
    # keep distinct lanes distinct: two entries sharing a base would be one stack
    unique = {}
    for lane in pool:
        unique.setdefault(lane.base, lane)
    pool = list(unique.values())
    txs = []
    current = pool[0]
    for _ in range(count):
        if rng.random() < 0.3:
            current = pool[int(rng.integers(0, len(pool)))]
        if rng.random() < 0.015:
            current.reset()
        request = _request(rng, current, model)
        response = model(request)
        if not response["error"]:
            current.reg = response["stack_addr"]
            current.popped = (
                response["dst0"] if request["op"] != StackOp.PUSH8_POP2 else response["dst1"]
            )
            if current.popped == TERMINAL_NODE:
                current.reset()
        txs.append(request)
    return txs


def _build(stack_size, waves, lanes):
    from gpurtl.hdl.ray_accel.ds_bvh_stack import BvhStack

    return BvhStack(stack_size=stack_size, waves=waves, lanes=lanes)


def _validate(stack_size, waves, lanes):
    if waves * stack_size > 512:
        raise ValueError(
            f"`waves * stack_size` must be at most 512 (the 14-bit base field), "
            f"not {waves * stack_size}"
        )


register(
    Block(
        name="ds_bvh_stack",
        doc="RDNA 4 LDS BVH stack instructions ds_bvh_stack_push8_pop1/push8_pop2/push4_pop1, "
        "one lane per cycle, stacks in 8 LDS banks",
        kind="pipeline",
        params=(
            Param("stack_size", 16, "ring entries per lane (OFFSET0)", choices=(8, 16, 24)),
            Param("waves", 2, "waves with a stack region in the LDS", range=(1, 64)),
            Param("lanes", 32, "lanes per wave (LDS DWORDs per row)", choices=(1, 2, 4, 8, 16, 32)),
        ),
        build=_build,
        golden=lambda stack_size, waves, lanes: BvhStackModel(
            stack_size=stack_size, waves=waves, lanes=lanes
        ),
        layouts=lambda stack_size, waves, lanes: (STACK_REQUEST_LAYOUT, STACK_RESPONSE_LAYOUT),
        stimulus=_stimulus,
        defaults=lambda stack_size, waves, lanes: {
            "last_node_ptr": INVALID_NODE,
            "tri_size_opt": 0,
            "prim_range": 0,
            "stack_addr": {
                "valid_entries": 0,
                "entries_to_tlas": 0,
                "addr": 0,
                "has_tlas": 0,
                "has_overflowed": 0,
                "blas2tlas_pop": 0,
            },
        },
        validate=_validate,
        check_count=2000,
    )
)
