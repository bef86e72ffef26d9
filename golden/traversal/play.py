"""A reference player of wave programs in Python: :class:`.program.WavePrograms` issued to an RT
unit under the CU model's RT unit mode (:func:`gpurtl.golden.cu.rt_unit.run`), every result
compared with the programs' expected words and every stack request answered by the golden
``ds_bvh_stack`` model (:class:`gpurtl.golden.ray_accel.ds_bvh_stack.BvhStackModel`, the
request's ``base`` moved to the wave's slot) and compared with the expected response.

With the golden RT unit (:class:`gpurtl.golden.rt_unit.RtUnitModel`) as ``unit`` it gives the
cycles and instruction records the compiled player (``gpurtl.sim.backends.fast.player``) must
reproduce on the RTL, at some thousand cycles a second: a check of the player on small runs,
never a figure reported as the RTL's.
"""

import numpy as np

from gpurtl.facts.ds_bvh_stack import StackOp
from gpurtl.golden.cu.rt_unit import HierarchyPort, run
from gpurtl.golden.ray_accel.ds_bvh_stack import BvhStackModel, pack_stack_addr, unpack_stack_addr

from .program import _DESC_BITS

__all__ = ["Played", "ProgramSource", "play", "unpack_desc"]

_BASE_LOW, _BASE_MASK = 15, (1 << 14) - 1  # the ADDR register's ``base`` field (bits 15..28)


def unpack_desc(value):
    """The descriptor dictionary of a packed ``DESC_LAYOUT`` value (:func:`.program.pack_desc`)."""
    out, low = {}, 0
    for name, width in _DESC_BITS:
        out[name] = (int(value) >> low) & ((1 << width) - 1)
        low += width
    return out


def _rebase(reg, offset):
    base = ((int(reg) >> _BASE_LOW) & _BASE_MASK) + offset
    return (int(reg) & ~(_BASE_MASK << _BASE_LOW)) | ((base & _BASE_MASK) << _BASE_LOW)


class Played:
    """What :func:`play` measured: ``run`` (the :class:`gpurtl.golden.cu.rt_unit.RtRun`),
    ``mismatches`` (fields that differ from the expected words), ``first_mismatches``
    (``(wave, iteration, lane, field)`` of the first ones), ``results`` and ``stack_checked``
    (lanes compared)."""

    def __init__(self):
        self.run = None
        self.mismatches = self.results = self.stack_checked = 0
        self.first_mismatches = []

    def differ(self, wave, iteration, lane, field):
        self.mismatches += 1
        if len(self.first_mismatches) < 10:
            self.first_mismatches.append((wave, iteration, lane, field))


class ProgramSource:
    """Wave ``wave`` of ``programs`` as :func:`gpurtl.golden.cu.rt_unit.run` asks for it."""

    def __init__(self, programs, wave, stack, played):
        self.p, self.wave, self.stack, self.played = programs, wave, stack, played
        self.first, self.end = programs.wave_iters[wave], programs.wave_iters[wave + 1]
        self.it = self.first

    def start(self, slot):
        self.slot = slot
        return self._message()

    def _lanes(self):
        return range(self.p.iter_lanes[self.it], self.p.iter_lanes[self.it + 1])

    def _message(self):
        if self.it == self.end:
            return None
        p = self.p
        kinds, payloads = [], []
        for e in self._lanes():
            kinds.append(int(p.lane_kind[e]))
            payloads.append(
                {
                    "tag": self.slot,
                    "last": 0,
                    "dual": int(p.dual[e]),
                    "ray": {
                        "origin": [int(v) for v in p.origin[e]],
                        "dir": [int(v) for v in p.dir[e]],
                        "extent": int(p.extent[e]),
                        "instance_mask": int(p.instance_mask[e]),
                    },
                    "node_ptr": [int(v) for v in p.node_ptr[e]],
                    "pointer_flags": int(p.pointer_flags[e]),
                    "desc": unpack_desc(p.desc[e]),
                }
            )
        return kinds, payloads

    def results(self, results):
        """Compare the RT unit's results and run the stack instructions; the lane count."""
        p, played = self.p, self.played
        lanes = self._lanes()
        it = self.it - self.first
        for e, got in zip(lanes, results, strict=True):
            lane = int(p.lane[e])
            played.results += 1
            for field, want in (
                ("dw", p.result_dw[e]),
                ("origin", p.result_origin[e]),
                ("dir", p.result_dir[e]),
            ):
                if [int(v) for v in got[field]] != [int(v) for v in want]:
                    played.differ(self.wave, it, lane, field)
            if int(got["status"]) != int(p.result_status[e]):
                played.differ(self.wave, it, lane, "status")
        offset = self.slot * p.stack_size * 32
        for e in lanes:
            request = {
                "op": int(p.stack_op[e]),
                "stack_addr": unpack_stack_addr(_rebase(p.stack_addr[e], offset)),
                "last_node_ptr": int(p.stack_last[e]),
                "data": [int(v) for v in p.stack_data[e]],
                "prim_range": int(p.stack_prim_range[e]),
                "tri_size_opt": int(p.stack_tri_size_opt[e]),
            }
            a = self.stack(request)
            played.stack_checked += 1
            lane = int(p.lane[e])
            if pack_stack_addr(a["stack_addr"]) != _rebase(p.stack_new_addr[e], offset):
                played.differ(self.wave, it, lane, "stack_addr")
            dst = [a["dst0"], a["dst1"] if request["op"] == int(StackOp.PUSH8_POP2) else None]
            want = [int(p.stack_dst[e, 0]), int(p.stack_dst[e, 1]) if dst[1] is not None else None]
            if dst != want or a["error"] != int(p.stack_error[e]):
                played.differ(self.wave, it, lane, "stack_dst")
        return len(lanes)

    def stacked(self):
        self.it += 1
        return self._message()


def play(programs, params, unit, *, slots, idle, beats=1):
    """Run ``programs`` on ``unit`` (an RT unit with ``step(inputs) -> outputs`` in the
    ``rt_unit`` block's dictionary form, ``slots`` wave slots; ``idle``: its idle ``inst``
    payload) under the CU parameters ``params`` (the levels below L0: ``params.levels[1:]``,
    warm with the programs' node lines; ``beats``: fill beats a line). A :class:`Played`."""
    words = programs.line_words.astype(np.uint64)
    memory_lines = {
        int(line): sum(int(w) << (32 * k) for k, w in enumerate(row))
        for line, row in zip(programs.lines, words)
    }
    memory = HierarchyPort(
        params.levels[1:],
        make_line=lambda line: memory_lines.get(line, 0),
        warm=list(memory_lines),
        beats=beats,
    )
    stack = BvhStackModel(stack_size=programs.stack_size, waves=slots, lanes=32)
    played = Played()
    sources = [ProgramSource(programs, w, stack, played) for w in range(programs.waves)]
    played.run = run(sources, params, unit, memory, slots=slots, idle=idle)
    return played
