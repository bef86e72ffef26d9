"""Shared machinery of the register-allocator experiments (no ``NAME``: not an experiment).

* :func:`run_rtl` drives a registered allocator's RTL cycle by cycle from a Python controller in
  a pysim session, and checks every cycle against the block's golden model.
* :class:`Simd` is that controller: a small wave scheduler for one SIMD (or one Xe3 vector
  engine) running wave programs made of actions:

  ``("alloc", n)``      ``s_alloc_vgpr n``, retried after ``retry`` cycles while SCC = 0
  ``("work", steps, latency)``  ``steps`` instructions, each issued in one cycle and followed by
                        ``latency`` cycles of waiting (a memory access)
  ``("barrier", name, members)`` wait until every program in ``members`` has arrived
  ``("wait_done", members)``     wait until every program in ``members`` has ended
  ``("spawn", program)``         (Xe3 split mode) queue ``program`` as a new thread at the head
                        of the dispatch queue; the current thread then ends

  Every program starts with a ``LAUNCH`` of ``launch_regs`` registers and ends with ``END``.
  One instruction issues per cycle (round robin over the ready waves; an ``s_alloc_vgpr`` attempt
  is an instruction too); the allocator's command port takes one command per cycle: ``END`` first,
  then the issuing wave's ``ALLOC``, then a ``LAUNCH`` from the dispatch queue.
"""

from gpurtl.golden.vgpr_alloc.common import OP
from gpurtl.sim.backends import BACKENDS
from gpurtl.sim.core import registry

__all__ = ["Program", "Simd", "run_rtl", "grantable"]


class Program:
    """One wave program: a name, the registers asked for at launch and a list of actions.
    ``counts``: its end completes a unit of work (False for a thread that only spawns another)."""

    def __init__(self, name, actions, launch_regs=0, counts=True):
        self.name, self.actions, self.launch_regs = name, list(actions), launch_regs
        self.counts = counts


class _Wave:
    def __init__(self, program, slot, start):
        self.program, self.slot, self.pc = program, slot, 0
        self.start = start
        self.ready_at = start  # cycle at which the next instruction may issue
        self.steps_left = None
        self.ending = False

    @property
    def action(self):
        return self.program.actions[self.pc] if self.pc < len(self.program.actions) else None


def grantable(out, wave, count, block_size, reserve, max_blocks=8):
    """Would ``s_alloc_vgpr count`` by ``wave`` succeed, judged from the RTL outputs alone
    (free count, reserve holder, the wave's blocks) with the rule of the dynamic allocator?"""
    tgt = max(1, -(-count // block_size))
    k = tgt - out["units"][wave]
    if tgt > max_blocks:
        return False
    if k <= 0:
        return True
    if out["free"] >= k + reserve:
        return True
    return out["free"] >= k and (not out.get("holder_valid") or out["holder"] == wave)


class Simd:
    """Wave scheduler driving one allocator (see the module doc string).

    Parameters
    ----------
    programs : list of Program
        The dispatch queue, in order.
    slots : int
        Wave/thread slots.
    retry : int
        Cycles a wave sleeps after a failed ``s_alloc_vgpr``.
    stall_limit : int
        Cycles with no progress (no instruction issued except failed allocation attempts, no
        successful command) after which the run is declared stuck and stops.
    """

    def __init__(
        self,
        programs,
        slots,
        *,
        retry=8,
        stall_limit=600,
        lookups=True,
        block_size=16,
        reserve=0,
        max_blocks=8,
    ):
        self.queue = list(programs)
        self.total = len(self.queue)
        self.slots = slots
        self.retry, self.stall_limit, self.lookups = retry, stall_limit, lookups
        self.block_size, self.reserve, self.max_blocks = block_size, reserve, max_blocks
        self.waves = {}  # slot -> _Wave
        self.arrived = {}  # barrier name -> set of program names
        self.done = set()  # names of ended programs
        self.finished = []  # (cycle, program name)
        self.work_done = 0  # ended programs that count as work
        self.trace = []  # per cycle: (resident, issued, alloc_waiting)
        self.alloc_fail = self.alloc_ok = 0
        self.issued = 0
        self.last_progress = 0
        self.stuck = None  # description when the run stopped making progress
        self.finished_all = False
        self.lookup_errors = 0
        self._pending = None
        self._rr = 0

    # --- per cycle ---------------------------------------------------------------------------
    def _advance(self, wave, cycle):
        """Move ``wave`` past actions that need no instruction; True if it may issue."""
        while True:
            action = wave.action
            if action is None:
                wave.ending = True
                return False
            kind = action[0]
            if kind == "barrier":
                _, name, members = action
                got = self.arrived.setdefault(name, set())
                got.add(wave.program.name)
                if not set(members) <= got:
                    return False
                wave.pc += 1
            elif kind == "wait_done":
                if not set(action[1]) <= self.done:
                    return False
                wave.pc += 1
            elif kind == "spawn":
                self.queue.insert(0, action[1])
                self.total += 1
                wave.pc += 1
            elif kind == "work":
                if wave.steps_left is None:
                    wave.steps_left = action[1]
                if wave.steps_left == 0:
                    wave.steps_left = None
                    wave.pc += 1
                    continue
                return wave.ready_at <= cycle
            else:  # alloc
                return wave.ready_at <= cycle

    def inputs(self, cycle):
        tx = {"op": OP.NONE, "wave": 0, "count": 0, "lk_wave": 0, "lk_reg": 0}
        ready = []
        ending = None
        for slot in sorted(self.waves, key=lambda s: self.waves[s].start):
            wave = self.waves[slot]
            if self._advance(wave, cycle):
                ready.append(wave)
            if wave.ending and ending is None:
                ending = wave
        # round robin from the slot after the last one that issued (oldest-first would let the
        # older waves' retries starve a younger wave whose request could succeed)
        issue = None
        if ready:
            issue = min(ready, key=lambda w: (w.slot - self._rr - 1) % self.slots)
        self._pending = None
        if ending is not None:
            tx.update(op=OP.END, wave=ending.slot)
            self._pending = ("end", ending)
            if issue is not None and issue.action[0] == "alloc":
                issue = None  # the command port is busy this cycle
        elif issue is not None and issue.action[0] == "alloc":
            tx.update(op=OP.ALLOC, wave=issue.slot, count=issue.action[1])
            self._pending = ("alloc", issue)
        elif self.queue and len(self.waves) < self.slots:
            slot = min(set(range(self.slots)) - set(self.waves))
            tx.update(op=OP.LAUNCH, wave=slot, count=self.queue[0].launch_regs)
            self._pending = ("launch", slot)
        self._issue = issue if issue is not None and issue.action[0] == "work" else None
        if self._issue is not None and self.lookups:
            regs = self._issue.program.actions
            held = [a[1] for a in regs[: self._issue.pc] if a[0] == "alloc"]
            top = held[-1] if held else max(self._issue.program.launch_regs, 1)
            tx.update(lk_wave=self._issue.slot, lk_reg=(cycle * 7) % min(max(top, 1), 256))
        return tx

    def observe(self, cycle, tx, out):
        progress = False
        if self._issue is not None:
            wave = self._issue
            self._rr = wave.slot
            wave.steps_left -= 1
            wave.ready_at = cycle + 1 + wave.action[2]
            self.issued += 1
            progress = True
            if self.lookups and not out["lk_valid"]:
                self.lookup_errors += 1
        pending = self._pending
        if pending is not None:
            kind = pending[0]
            if kind == "end" and out["ack"]:
                wave = pending[1]
                del self.waves[wave.slot]
                self.done.add(wave.program.name)
                self.finished.append((cycle, wave.program.name))
                self.work_done += int(wave.program.counts)
                progress = True
            elif kind == "alloc":
                wave = pending[1]
                self._rr = wave.slot
                if out["ack"]:
                    wave.pc += 1
                    wave.ready_at = cycle + 1
                    self.alloc_ok += 1
                    progress = True
                else:
                    wave.ready_at = cycle + 1 + self.retry
                    self.alloc_fail += 1
            elif kind == "launch" and out["ack"]:
                program = self.queue.pop(0)
                self.waves[pending[1]] = _Wave(program, pending[1], cycle + 1)
                progress = True
        waiting = sum(
            1 for w in self.waves.values() if w.action is not None and w.action[0] == "alloc"
        )
        resident = sum(1 for u in out["units"] if u)
        self.trace.append((resident, int(self._issue is not None), waiting, self.work_done))
        if progress:
            self.last_progress = cycle
        if not self.queue and not self.waves:
            self.finished_all = True
        elif cycle - self.last_progress > self.stall_limit:
            self.stuck = self._diagnose(out)

    def _diagnose(self, out):
        alloc = [w for w in self.waves.values() if w.action and w.action[0] == "alloc"]
        other = [w for w in self.waves.values() if w not in alloc]
        can = [
            w.slot
            for w in alloc
            if grantable(out, w.slot, w.action[1], self.block_size, self.reserve, self.max_blocks)
        ]
        return {
            "free_blocks": out["free"],
            "holder": out["holder"] if out.get("holder_valid") else None,
            "holder_blocks": out["units"][out["holder"]] if out.get("holder_valid") else 0,
            "waiting_alloc": {w.slot: (out["units"][w.slot], w.action[1]) for w in alloc},
            "waiting_other": {w.slot: w.action[0] for w in other},
            "grantable": can,
        }

    @property
    def over(self):
        return self.finished_all or self.stuck is not None


def run_rtl(block_name, params, controller, max_cycles):
    """Drive the RTL of ``block_name`` from ``controller`` (``inputs(cycle)`` /
    ``observe(cycle, tx, out)`` / ``over``) in a pysim session, comparing every cycle with the
    golden model. Returns the number of cycles run; raises
    :class:`~gpurtl.sim.harness.session.MismatchError` (an AssertionError) on an RTL/golden
    mismatch."""
    block = registry.get(block_name)
    params = block.resolve(params)
    with BACKENDS["pysim"].session(block, params, golden=True, strict=True) as session:
        for cycle in range(max_cycles):
            tx = controller.inputs(cycle)
            controller.observe(cycle, tx, session.apply(tx))
            if controller.over:
                return cycle + 1
    return max_cycles
