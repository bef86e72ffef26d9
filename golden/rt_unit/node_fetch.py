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
* The dual form (``dual = 1``, two legacy nodes) is not fetched by the default build: such an
  instruction still fetches the line of ``node_ptr[0] >> 4`` and is handed on as for BVH8,
  with ``err.dual`` high in the cycle it is taken.
* The L0 is :class:`~.l0_cache.L0CacheModel` with ``2 ** id_bits`` ids; its memory ports,
  error and event outputs are this block's.

With ``dual=True`` (order ``"wave"`` only) the block fetches the dual form,
``image_bvh_dual_intersect_ray`` on two legacy BVH4 nodes (``err.dual`` stays low):

* A legacy pointer is ``byte offset >> 3`` with the type in bits 0..2 (gpurt's RT IP 1.x/2.x
  pointer, ``(ptr & ~7) << 3``), so its node starts in the line ``node_ptr[k] >> 4`` at the
  64-byte half ``node_ptr[k]`` bit 3 names, as a BVH8 node's line does. A node lies in one line
  (the builder puts 128-byte box nodes at 128-byte offsets, 64-byte triangle nodes at any
  64-byte offset): ``node[k]`` is the 64 bytes at the pointer in dwords 0..15 and, for a
  128-byte node type (not 0, 1 or 4, the legacy triangle and FP16 box nodes), the line's other
  half in dwords 16..31; dwords 16..31 of a 64-byte node are zero (:func:`dual_node`).
* The instruction is taken as a BVH8 one, with the L0 request of ``node_ptr[0]``'s line (id:
  the slot). If its second node is to be fetched, the L0 request of ``node_ptr[1]``'s line (id:
  the slot + ``2 ** id_bits``; the L0 has ``id_bits + 1`` id bits) is offered from the next
  cycle on, held until the L0 takes it, and no instruction is taken meanwhile: one L0 lookup a
  cycle, two for the instruction, in one ray buffer slot.
* The second node is not fetched when it is the empty node (``node_ptr[1] ==``
  :data:`~gpurtl.facts.rt_unit.DUAL_EMPTY_PTR`: ``node[1]`` is
  :data:`~gpurtl.facts.rt_unit.DUAL_EMPTY_NODE`) or lies in the line of ``node_ptr[0]`` (the
  first lookup's line serves both; CHOICE: one lookup per distinct line, as a request merged
  before the L0).
* The node buffer holds two lines a slot; the slot may leave when every line it asked for is in
  (and it is its wave's oldest), as for BVH8. A BVH8 instruction (``dual = 0``) in this build
  behaves as in the default build.
"""

from gpurtl.facts.rt_unit import (
    DUAL_EMPTY_NODE,
    DUAL_EMPTY_PTR,
    FETCH_ORDER,
    FETCH_TAG_BITS,
    ORDERS,
)

from .l0_cache import L0CacheModel

__all__ = ["NodeFetchModel", "dual_node"]

#: legacy node types of 64 bytes: triangles 0 and 1, the FP16 box node
_SHORT_TYPES = (0, 1, 4)


def dual_node(line, ptr):
    """The 32 dwords the dual form's node at ``ptr`` gets from its 1024-bit ``line`` (module
    doc)."""
    half = (ptr >> 3) & 1
    low = (line >> (512 * half)) & ((1 << 512) - 1)
    if not half and ptr & 7 not in _SHORT_TYPES:
        low = line
    return [(low >> (32 * k)) & 0xFFFFFFFF for k in range(32)]


class NodeFetchModel:
    """Golden model of :class:`gpurtl.hdl.rt_unit.NodeFetch` (parameters as there; ``**fields``
    replace fields of ``geometry``)."""

    def __init__(
        self, geometry=None, tag_bits=FETCH_TAG_BITS, order=FETCH_ORDER, dual=False, **fields
    ):
        if order not in ORDERS:
            raise ValueError(f"`order` must be one of {', '.join(ORDERS)}, not {order!r}")
        if dual and order != "wave":
            raise ValueError('`dual` needs order "wave"')
        self.l0 = L0CacheModel(geometry, **fields)
        id_bits, line_bits = self.l0.id_bits, self.l0.line_bits
        self.dual = bool(dual)
        if self.dual:  # a second id per slot for the second node's lookup
            self.l0 = L0CacheModel(self.l0.geometry, id_bits=id_bits + 1)
            self.nodes1 = [0] * (1 << id_bits)
            self.arrived1 = [False] * (1 << id_bits)
            self.second = None  # (slot, line) of the second lookup not yet taken
        self.id_bits = id_bits
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

    def _dual_instruction(self, entry, line0, line1):
        """As :meth:`_instruction`, with the dual form's nodes (module doc)."""
        out = self._instruction(entry, line0)
        instr = out["instr"]
        if not instr["dual"]:
            return out
        p0, p1 = instr["node_ptr"]
        instr["node"][0] = dual_node(line0, p0)
        if p1 == DUAL_EMPTY_PTR:
            instr["node"][1] = list(DUAL_EMPTY_NODE)
        else:
            instr["node"][1] = dual_node(line0 if self._shared(p0, p1) else line1, p1)
        return out

    def _shared(self, p0, p1):
        mask = (1 << self.line_bits) - 1
        return (p0 >> 4) & mask == (p1 >> 4) & mask

    def step(self, inputs):
        if self.dual:
            return self._step_dual(inputs)
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

    def _step_dual(self, inputs):
        """:meth:`step` of the ``dual=True`` build."""
        inst = inputs["inst"]
        payload = inst["payload"]
        if self._zero is None:
            self._zero = _zeroed(payload)
        free = [k for k in range(self.slots) if not self.busy[k]]
        slot = free[0] if free else 0
        mask = (1 << self.line_bits) - 1
        if self.second is not None:
            req = {
                "valid": 1,
                "payload": {"id": self.second[0] + self.slots, "line": self.second[1]},
            }
        else:
            line = (payload["node_ptr"][0] >> 4) & mask
            req = {
                "valid": int(bool(inst["valid"]) and bool(free)),
                "payload": {"id": slot, "line": line},
            }
        l0 = self.l0.step(
            {"req": req, "resp": {"ready": 1}, "mem_req": inputs["mem_req"], "fill": inputs["fill"]}
        )
        ready = int(self.second is None and bool(free) and bool(l0["req"]["ready"]))
        take = bool(inst["valid"]) and bool(ready)
        resp = l0["resp"]
        rid = resp["payload"]["id"]
        heads = [q[0] for q in self.queues if q and self.arrived[q[0]] and self.arrived1[q[0]]]
        sel = self.hold if self.hold is not None else min(heads, default=0)
        valid = int(self.hold is not None or bool(heads))
        out = self._dual_instruction(self.buffer[sel], self.nodes[sel], self.nodes1[sel])
        outputs = {
            "inst": {"ready": ready},
            "out": {"valid": valid, "payload": out},
            "mem_req": l0["mem_req"],
            "fill": l0["fill"],
            "err": {"unexpected_fill": l0["err"]["unexpected_fill"], "dual": 0},
            "event": l0["event"],
        }
        leave = bool(valid) and bool(inputs["out"]["ready"])
        self.hold = sel if valid and not leave else None
        if leave:
            self.busy[sel] = self.arrived[sel] = self.arrived1[sel] = False
            self.queues[self.wave_of[sel]].pop(0)
        if resp["valid"]:
            if rid >= self.slots:
                self.nodes1[rid - self.slots] = resp["payload"]["data"]
                self.arrived1[rid - self.slots] = True
            else:
                self.nodes[rid] = resp["payload"]["data"]
                self.arrived[rid] = True
        if self.second is not None and l0["req"]["ready"]:
            self.second = None
        if take:
            p0, p1 = payload["node_ptr"]
            fetch1 = bool(payload["dual"]) and p1 != DUAL_EMPTY_PTR and not self._shared(p0, p1)
            self.busy[slot] = True
            self.arrived1[slot] = not fetch1
            self.buffer[slot] = {key: value for key, value in payload.items()}
            self.wave_of[slot] = payload["tag"]
            self.queues[payload["tag"]].append(slot)
            if fetch1:
                self.second = (slot, (p1 >> 4) & mask)
        return outputs


def _zeroed(value):
    """``value`` (nested dicts and lists of ints) with every int 0."""
    if isinstance(value, dict):
        return {key: _zeroed(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_zeroed(item) for item in value]
    return 0
