"""Cycle-stepped golden model of the RT unit top (:mod:`gpurtl.hdl.rt_unit.top`).

The RT unit is three blocks with golden models of their own, joined by the rules below:

* :class:`~.node_fetch.NodeFetchModel` with ``order="wave"`` (the instruction's ``tag`` is its
  wave: each wave's instructions reach the accelerator in the order they came);
* the ray accelerator (:class:`AccelTiming` around the scalar
  :class:`~gpurtl.golden.ray_accel.scalar.intersect.IntersectModel`): it takes an instruction
  when its global enable ``en = ~o.valid | o.ready`` is high and its entry register is free or
  on its last slot group (every ``groups`` enabled cycles at most); the result leaves ``groups +
  depth`` enabled cycles after it was taken;
* the wait counters (:class:`~gpurtl.golden.waitcnt.WaitCountersModel`, GFX12, ``2 ** tag_bits``
  waves, full policy ``stall``) count wave instructions. The ``inst`` stream carries one lane a
  transfer; a wave instruction is a wave's lanes up to the one with ``last`` set (lanes of
  other waves may come in between). The first lane taken of a wave instruction is a ``BVH``
  issue of its wave (the count is visible from the next cycle); the result of its ``last``
  lane taken is a ``bvh`` return (results are in order within a wave, so that is the
  instruction's completion). The ``wait`` input takes the raw ``s_wait_*`` word. The first lane
  of an instruction of a wave whose ``bvhcnt`` is at its maximum (7) is refused; later lanes
  of an instruction are not refused for the count.

The output ``out`` is ``{wave, last, result}`` (``result`` as ``OUT_LAYOUT``, ``last`` the
lane's instruction's), all zero while ``out.valid`` is low; ``bvh`` gives every wave's
``stall`` bit and ``bvhcnt``.
"""

from gpurtl.facts.rt_unit import WAVE_TAG_BITS
from gpurtl.facts.waitcnt import InstClass
from gpurtl.golden.ray_accel.scalar.intersect import IntersectModel
from gpurtl.golden.waitcnt import WaitCountersModel

from .node_fetch import NodeFetchModel

__all__ = ["AccelTiming", "RtUnitModel"]

_ZERO_RESULT = {"dw": [0] * 10, "origin": [0] * 3, "dir": [0] * 3, "status": 0}


class AccelTiming:
    """Cycle timing of the ray accelerator around its transaction model ``model``.

    Parameters
    ----------
    model : callable
        Instruction dictionary to result dictionary.
    groups : int
        Enabled cycles an instruction holds the entry register (the initiation interval).
    depth : int
        Enabled cycles from the last slot group to the output (``latency - groups``).
    """

    def __init__(self, model, groups, depth):
        if groups < 1 or depth < 1:
            raise ValueError(f"`groups` and `depth` must be positive, not {groups}, {depth}")
        self.model, self.groups = model, groups
        self.s1 = None  # (instruction, side) in the entry register
        self.phase = 0
        self.line = [None] * depth  # (result, side) per enabled cycle, the newest first

    @property
    def out(self):
        """``(result, side)`` on the output, or ``None``."""
        return self.line[-1]

    def step(self, offer, o_ready):
        """One clock; ``offer`` is ``(instruction, side)`` or ``None``. Returns whether the
        accelerator took it (``i.ready``, which does not depend on the offer)."""
        en = self.line[-1] is None or bool(o_ready)
        last = self.phase == self.groups - 1
        take = en and (self.s1 is None or last)
        if en:
            done = None
            if self.s1 is not None and last:
                done = (self.model(self.s1[0]), self.s1[1])
            self.line = [done] + self.line[:-1]
        if take:
            self.s1, self.phase = offer, 0
        elif en:
            self.phase += 1
        return take


class RtUnitModel:
    """Golden model of :class:`gpurtl.hdl.rt_unit.RtUnit`.

    Parameters
    ----------
    geometry : L0Geometry, optional
        The L0's (:class:`gpurtl.facts.rt_unit.L0Geometry`); ``**fields`` replace its fields.
    tag_bits : int
        ``2 ** tag_bits`` waves.
    accel_groups, accel_depth : int
        The ray accelerator build's timing (see :class:`AccelTiming`).
    ftz : bool
    paths : frozenset
        The node kinds the accelerator build has (others give status 1).
    dual : bool
        The node fetch fetches the dual form's two nodes (:class:`~.node_fetch.NodeFetchModel`).
    """

    def __init__(
        self,
        geometry=None,
        tag_bits=WAVE_TAG_BITS,
        *,
        accel_groups,
        accel_depth,
        ftz=False,
        paths=None,
        dual=False,
        **fields,
    ):
        self.fetch = NodeFetchModel(geometry, tag_bits, "wave", dual, **fields)
        self.accel = AccelTiming(IntersectModel(ftz=ftz, paths=paths), accel_groups, accel_depth)
        self.counters = WaitCountersModel("gfx12", 1 << tag_bits, "stall")
        self.waves = 1 << tag_bits
        self.open = [False] * self.waves  # lanes of the wave's instruction taken, its last not
        self._max = self.counters.prof.max("bvh")

    def step(self, inputs):
        inst, out_ready = inputs["inst"], bool(inputs["out"]["ready"])
        wave, last = inst["payload"]["tag"], bool(inst["payload"]["last"])
        first = not self.open[wave]
        full = first and self.counters.cnt[wave]["bvh"] == self._max

        leaving = self.accel.out
        # The accelerator's i.ready first: it does not depend on what the node fetch offers.
        en = leaving is None or out_ready
        accel_ready = en and (self.accel.s1 is None or self.accel.phase == self.accel.groups - 1)
        fetch_out = self.fetch.step(
            {
                "inst": {
                    "valid": int(bool(inst["valid"]) and not full),
                    "payload": inst["payload"],
                },
                "out": {"ready": int(accel_ready)},
                "mem_req": inputs["mem_req"],
                "fill": inputs["fill"],
            }
        )
        offer = None
        if fetch_out["out"]["valid"]:
            payload = fetch_out["out"]["payload"]
            offer = (payload["instr"], (payload["tag"], payload["last"]))
        self.accel.step(offer, out_ready)

        ready = bool(fetch_out["inst"]["ready"]) and not full
        take = bool(inst["valid"]) and ready
        if take:
            self.open[wave] = not last
        side = leaving[1] if leaving is not None else (0, 0)
        returned = leaving is not None and out_ready and bool(side[1])
        ret = {name: {"valid": 0, "wave": 0} for name in self.counters.prof.counters}
        ret["bvh"] = {"valid": int(returned), "wave": side[0]}
        counter_out = self.counters.step(
            {
                "issue": {
                    "valid": int(take and first),
                    "wave": wave,
                    "cls": InstClass.BVH.value,
                },
                "wait": inputs["wait"],
                "ret": ret,
            }
        )
        result = leaving[0] if leaving is not None else _ZERO_RESULT
        return {
            "inst": {"ready": int(ready)},
            "out": {
                "valid": int(leaving is not None),
                "payload": {"wave": side[0], "last": side[1], "result": result},
            },
            "mem_req": fetch_out["mem_req"],
            "fill": fetch_out["fill"],
            "bvh": {
                "stall": counter_out["stall"],
                "bvhcnt": [c["bvh"] for c in counter_out["cnt"]],
            },
            "err": {
                "unexpected_fill": fetch_out["err"]["unexpected_fill"],
                "dual": fetch_out["err"]["dual"],
                "bad_wait": counter_out["err"]["bad_wait"],
            },
            "event": fetch_out["event"],
        }
