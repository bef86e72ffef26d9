"""Cycle-stepped golden model of the RT unit's node fetch (:mod:`gpurtl.hdl.rt_unit.node_fetch`).

The rules, shared bit for bit with the RTL:

* An instruction (``tag``, ``last``, ``dual``, ``ray``, ``node_ptr``, ``pointer_flags``, ``desc``: the
  ray accelerator's instruction without its node data) is taken when a ray buffer slot is free
  and the L0 takes the node's line request. The slot is the lowest free one; it is the L0
  request id. ``image_bvh8_intersect_ray`` nodes are 128 bytes at byte offset
  ``(node_ptr & ~0xF) << 3`` from the BVH base, one L0 line: the line index is
  ``node_ptr[0] >> 4`` (its low ``line_bits`` bits; the memory side adds the base).
* The output is the L0 response, combined with the slot the response's id names: the
  instruction with ``node[0]`` the line's 32 dwords (``node[1]`` zero) and the instruction's
  ``tag``. The slot is free again after the output is taken. Outputs leave in the L0's
  response order (hits overtake misses). The instruction's ``last`` bit goes along with its
  ``tag`` (the node fetch does not look at it).
* ``order="wave"``: the tag is a wave. The L0's response is always taken and its line written
  into the slot's node buffer entry; a slot may leave when its line is in and it is its wave's
  oldest instruction still here. The lowest such slot leaves (combinationally, in the cycle after
  its line came); an offer refused by ``out.ready`` is held, the same slot, until taken. The slot
  is free again after it left.
* The dual form (``dual = 1``, two legacy nodes) is not fetched by this block: such an
  instruction still fetches the line of ``node_ptr[0] >> 4`` and is handed on as for BVH8,
  with ``err.dual`` high in the cycle it is taken.
* The L0 is :class:`~.l0_cache.L0CacheModel` with ``2 ** id_bits`` ids; its memory ports,
  error and event outputs are this block's.
"""

from gpurtl.facts.rt_unit import FETCH_ORDER, FETCH_TAG_BITS, ORDERS

from .l0_cache import L0CacheModel

__all__ = ["NodeFetchModel"]


class NodeFetchModel:
    """Golden model of :class:`gpurtl.hdl.rt_unit.NodeFetch` (parameters as there; ``**fields``
    replace fields of ``geometry``)."""

    def __init__(self, geometry=None, tag_bits=FETCH_TAG_BITS, order=FETCH_ORDER, **fields):
        if order not in ORDERS:
            raise ValueError(f"`order` must be one of {', '.join(ORDERS)}, not {order!r}")
        self.l0 = L0CacheModel(geometry, **fields)
        id_bits, line_bits = self.l0.id_bits, self.l0.line_bits
        self.order = order
        self.nodes = [0] * (1 << id_bits)  # order "wave": the node buffer
        self.arrived = [False] * (1 << id_bits)
        self.wave_of = [0] * (1 << id_bits)
        self.queues = [
            [] for _ in range(1 << tag_bits)
        ]  # order "wave": slots of each wave, oldest first
        self.hold = None
        self.slots = 1 << id_bits
        self.line_bits, self.tag_bits = line_bits, tag_bits
        self.busy = [False] * self.slots
        self.buffer = [None] * self.slots  # the instruction each slot holds (None: never written)
        self._zero = None

    def _instruction(self, entry, data):
        """The accelerator instruction of buffer ``entry`` with the node ``data``."""
        if entry is None:
            entry = self._zero
        dwords = [(data >> (32 * k)) & 0xFFFFFFFF for k in range(32)]
        instr = {key: value for key, value in entry.items() if key not in ("tag", "last")}
        instr["node"] = [dwords, [0] * 32]
        return {"tag": entry["tag"], "last": entry["last"], "instr": instr}

    def step(self, inputs):
        inst = inputs["inst"]
        payload = inst["payload"]
        if self._zero is None:  # the all-zero instruction of a never written slot
            self._zero = _zeroed(payload)
        free = [k for k in range(self.slots) if not self.busy[k]]
        slot = free[0] if free else 0
        line = (payload["node_ptr"][0] >> 4) & ((1 << self.line_bits) - 1)
        wave = self.order == "wave"
        l0_in = {
            "req": {
                "valid": int(bool(inst["valid"]) and bool(free)),
                "payload": {"id": slot, "line": line},
            },
            "resp": {"ready": 1 if wave else inputs["out"]["ready"]},
            "mem_req": inputs["mem_req"],
            "fill": inputs["fill"],
        }
        l0 = self.l0.step(l0_in)
        ready = int(bool(free) and bool(l0["req"]["ready"]))
        take = bool(inst["valid"]) and ready
        resp = l0["resp"]
        rid = resp["payload"]["id"]
        if wave:
            heads = [q[0] for q in self.queues if q and self.arrived[q[0]]]
            sel = self.hold if self.hold is not None else min(heads, default=0)
            valid = int(self.hold is not None or bool(heads))
            out = self._instruction(self.buffer[sel], self.nodes[sel])
        else:
            valid = resp["valid"]
            out = self._instruction(self.buffer[rid], resp["payload"]["data"])
        outputs = {
            "inst": {"ready": ready},
            "out": {"valid": valid, "payload": out},
            "mem_req": l0["mem_req"],
            "fill": l0["fill"],
            "err": {
                "unexpected_fill": l0["err"]["unexpected_fill"],
                "dual": int(take and bool(payload["dual"])),
            },
            "event": l0["event"],
        }
        leave = bool(valid) and bool(inputs["out"]["ready"])
        if wave:
            self.hold = sel if valid and not leave else None
            if leave:
                self.busy[sel] = self.arrived[sel] = False
                self.queues[self.wave_of[sel]].pop(0)
            if resp["valid"]:
                self.nodes[rid] = resp["payload"]["data"]
                self.arrived[rid] = True
        elif leave:
            self.busy[rid] = False
        if take:
            self.busy[slot] = True
            self.buffer[slot] = {key: value for key, value in payload.items()}
            self.wave_of[slot] = payload["tag"]
            self.queues[payload["tag"]].append(slot)
        return outputs


def _zeroed(value):
    """``value`` (nested dicts and lists of ints) with every int 0."""
    if isinstance(value, dict):
        return {key: _zeroed(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_zeroed(item) for item in value]
    return 0
