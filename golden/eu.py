"""Cycle model of the Gen EU issue block (:class:`gpurtl.hdl.eu.EuIssue`), defining it clock
for clock.

The rules, in words (the RTL doc string has the same list):

* **Threads** ``0..threads-1`` each run the program in their own program memory (``depth``
  words, written through ``load``) from word 0. ``start`` (a thread mask and a pass count)
  restarts the masked threads: pc 0, scoreboard cleared, ``passes`` runs through the program
  (0: the thread stops). The word with ``eot`` set ends a pass.
* **Operands.** An operand of ``s`` SIMD lanes of a ``b``-byte type spans
  ``max(1, s * b / 32)`` registers (one or two); the read port reads whole 32-byte registers,
  so an instruction reads ``sources x span x 32`` bytes.
* **Read port.** Every clock it adds ``read_bytes`` to the bytes already read; an instruction
  issues only if its bytes are there, and what is left (at most ``OPERAND_BUFFER``) carries to
  the next clock: a pair of SIMD8 float adds (128 bytes) issues in alternate clocks behind a
  96-byte port, so float adds run at 1.5 per clock, not 2 (the article's explanation).
* **Scoreboard.** Each thread's register ``r`` is pending while its countdown is not zero or
  its ``held`` bit is set. An instruction waits until its sources are not pending and, unless it
  has ``noddchk``, its destination registers are not pending either. Issuing sets each
  destination's countdown to ``latency - 1`` (if larger than what is left), so a dependent
  instruction issues ``latency`` clocks after its producer at the earliest; ``noddclr`` sets the
  destinations' ``held`` bits and a later write without it clears them.
* **Latencies.** ALU: ``fp_latency`` (float) or ``int_latency`` plus ``passes - 1``; math:
  ``math_latency`` plus its occupancy minus one; send: the hit or miss latency plus ``lines``.
* **Units.** Two ALU pipes take one SIMD1/4/8 instruction per clock, SIMD16 every two (two
  passes); pipe 1 takes only dual-issuable instructions (float MOV/ADD/MUL/MAD without
  ``noddchk``). The math unit is busy ``passes x rate`` clocks (rate 1, 2 for pow/sin/cos/fdiv,
  and integer divide ``2 x lanes``: 16 for SIMD8, 8 for SIMD4; SIMD16 integer divide is illegal,
  flagged, and runs as two SIMD8 halves). The data port is busy ``lines + 1`` clocks per send and
  takes one only while ``dp_ready`` is high.
* **Arbiter.** Nothing issues while ``hold`` is high. Otherwise slot 0 takes the first thread in
  round-robin order (from the thread after the last one that issued) whose instruction is ready
  (scoreboard, unit, bytes). If it is dual-issuable and went to pipe 0, slot 1 takes the next
  thread after it in that order whose instruction is dual-issuable, ready, has pipe 1 free and
  whose bytes fit with slot 0's.
* Outputs (``issue``, ``active``, ``credit``) are this clock's: ``issue`` is combinational from
  the state and this clock's inputs; ``load`` and ``start`` take effect at the clock edge
  (``start`` over the issue's effects on the same thread).

Written as plain Python over lists, independently of the RTL.
"""

from gpurtl.facts.eu import (
    EXEC_LANES,
    GRF_BYTES,
    OPERAND_BUFFER,
    REGS,
    TYPE_BYTES,
    ExecSize,
    MathFn,
    Op,
    Type,
    dual_capable,
    inst_layout,
    math_rate,
    num_sources,
)

__all__ = ["EuIssueModel", "Decoded", "encode", "fields_of", "PARAM_DEFAULTS"]

IDIV = (MathFn.IDIV_QR.value, MathFn.IDIV_Q.value, MathFn.IDIV_R.value)

#: The block's parameters and their defaults (the registry's and the RTL's).
PARAM_DEFAULTS = {
    "threads": 7,
    "depth": 16,
    "read_bytes": 96,
    "fp_latency": 9,
    "int_latency": 7,
    "math_latency": 12,
    "hit_latency": 49,
    "miss_latency": 84,
}

#: ``(name, offset, width)`` of every instruction field (:func:`gpurtl.facts.eu.inst_layout`).
_FIELDS = tuple((name, field.offset, field.width) for name, field in inst_layout())


def encode(**fields):
    """An instruction word (``int``) from field values (enum members or integers); absent
    fields are 0. The layout is :data:`gpurtl.facts.eu.INST_FIELDS`, low bits first."""
    word = 0
    for name, offset, width in _FIELDS:
        value = fields.pop(name, 0)
        value = getattr(value, "value", value)
        if not 0 <= value < (1 << width):
            raise ValueError(f"`{name}` must fit in {width} bits, not {value!r}")
        word |= value << offset
    if fields:
        raise ValueError(f"unknown instruction fields: {', '.join(sorted(fields))}")
    return word


def fields_of(word):
    """``{field: int}`` of an instruction word."""
    return {name: (word >> offset) & ((1 << width) - 1) for name, offset, width in _FIELDS}


class Decoded:
    """What the issue logic needs to know about one instruction word."""

    def __init__(self, word, params):
        f = fields_of(word)
        op = Op(f["op"])
        if op is Op.NOP7:
            op = Op.NOP
        size, type_ = ExecSize(f["size"]), Type(f["type"])
        lanes = EXEC_LANES[size]
        span = max(1, lanes * TYPE_BYTES[type_] // GRF_BYTES)
        passes = 2 if size is ExecSize.SIMD16 else 1
        nsrc = num_sources(op, f["fn"])
        self.op, self.eot, self.fn = op, f["eot"], f["fn"]
        self.noddchk, self.noddclr = f["noddchk"], f["noddclr"]
        self.srcs = [(f[f"src{k}"] + j) % REGS for k in range(nsrc) for j in range(span)]
        self.bytes = nsrc * span * GRF_BYTES
        self.dual = int(dual_capable(op, type_) and not f["noddchk"])
        self.illegal = int(op is Op.MATH and f["fn"] in IDIV and size is ExecSize.SIMD16)
        if op is Op.NOP:
            self.unit, self.dsts, self.occupancy, self.latency = "none", [], 1, 1
        elif op is Op.SEND:
            self.unit = "dp"
            self.dsts = [(f["dst"] + j) % REGS for j in range(f["rlen"] + 1)]
            self.occupancy = f["lines"] + 1
            base = params["miss_latency"] if f["miss"] else params["hit_latency"]
            self.latency = base + f["lines"]
        elif op is Op.MATH:
            self.unit = "em"
            self.dsts = [(f["dst"] + j) % REGS for j in range(span)]
            if f["fn"] in IDIV:
                self.occupancy = 2 * min(lanes, 8) * passes
            else:
                self.occupancy = math_rate(f["fn"]) * passes
            self.latency = params["math_latency"] + self.occupancy - 1
        else:
            self.unit = "alu"
            self.dsts = [(f["dst"] + j) % REGS for j in range(span)]
            self.occupancy = passes
            base = params["fp_latency"] if type_ is Type.F else params["int_latency"]
            self.latency = base + passes - 1


class EuIssueModel:
    """Golden model of :class:`gpurtl.hdl.eu.EuIssue` (see the module doc string)."""

    def __init__(self, **params):
        unknown = set(params) - set(PARAM_DEFAULTS)
        if unknown:
            raise TypeError(f"unknown parameters: {', '.join(sorted(unknown))}")
        self.p = {**PARAM_DEFAULTS, **params}
        t, depth = self.p["threads"], self.p["depth"]
        self.threads, self.depth = t, depth
        self.mem = [[0] * depth for _ in range(t)]
        self._decoded = {}
        self.pc = [0] * t
        self.passes = [0] * t
        self.active = [0] * t
        self.cnt = [[0] * REGS for _ in range(t)]
        self.held = [[0] * REGS for _ in range(t)]
        self.units = {"pipe0": 0, "pipe1": 0, "em": 0, "dp": 0}
        self.credit = 0
        self.rr = 0

    def decode(self, word):
        d = self._decoded.get(word)
        if d is None:
            d = self._decoded[word] = Decoded(word, self.p)
        return d

    def pending(self, t, r):
        """Whether register ``r`` of thread ``t`` is pending (a mutant may change this)."""
        return self.cnt[t][r] != 0 or self.held[t][r]

    def regs_clear(self, t, d):
        if any(self.pending(t, r) for r in d.srcs):
            return False
        return d.noddchk or not any(self.pending(t, r) for r in d.dsts)

    def step(self, inputs):
        t_count = self.threads
        avail = self.credit + self.p["read_bytes"]
        out = {
            "issue": [
                {"valid": 0, "thread": 0, "pc": 0, "pipe": 0, "illegal": 0} for _ in range(2)
            ],
            "active": sum(a << t for t, a in enumerate(self.active)),
            "credit": self.credit,
        }
        order = [(self.rr + k) % t_count for k in range(t_count)]
        chosen = []
        if not inputs["hold"]:
            u = self.units
            for t in order:
                if not self.active[t]:
                    continue
                d = self.decode(self.mem[t][self.pc[t]])
                if d.bytes > avail or not self.regs_clear(t, d):
                    continue
                pipe = 0
                if d.unit == "alu":
                    if u["pipe0"] == 0:
                        pipe = 0
                    elif d.dual and u["pipe1"] == 0:
                        pipe = 1
                    else:
                        continue
                elif d.unit == "em" and u["em"] != 0:
                    continue
                elif d.unit == "dp" and (u["dp"] != 0 or not inputs["dp_ready"]):
                    continue
                chosen.append((t, d, pipe))
                break
            if chosen and chosen[0][1].dual and chosen[0][2] == 0 and u["pipe1"] == 0:
                t0, d0, _ = chosen[0]
                start = order.index(t0) + 1
                for t in order[start:]:
                    if not self.active[t]:
                        continue
                    d = self.decode(self.mem[t][self.pc[t]])
                    if d.dual and d0.bytes + d.bytes <= avail and self.regs_clear(t, d):
                        chosen.append((t, d, 1))
                        break
        used = 0
        for slot, (t, d, pipe) in enumerate(chosen):
            out["issue"][slot] = {
                "valid": 1,
                "thread": t,
                "pc": self.pc[t],
                "pipe": pipe,
                "illegal": d.illegal,
            }
            used += d.bytes
        self._advance(inputs, chosen, avail - used)
        return out

    def _advance(self, inputs, chosen, left):
        self.credit = min(left, OPERAND_BUFFER)
        for name in self.units:
            self.units[name] = max(self.units[name] - 1, 0)
        for t in range(self.threads):
            self.cnt[t] = [max(c - 1, 0) for c in self.cnt[t]]
        for t, d, pipe in chosen:
            unit = {"alu": f"pipe{pipe}", "em": "em", "dp": "dp", "none": None}[d.unit]
            if unit is not None:
                self.units[unit] = d.occupancy - 1
            for r in d.dsts:
                self.cnt[t][r] = max(self.cnt[t][r], d.latency - 1)
                self.held[t][r] = d.noddclr
            if d.eot:
                if self.passes[t] > 1:
                    self.passes[t] -= 1
                else:
                    self.active[t] = 0
                self.pc[t] = 0
            else:
                self.pc[t] = (self.pc[t] + 1) % self.depth
        if chosen:
            self.rr = (chosen[-1][0] + 1) % self.threads
        load = inputs["load"]
        if load["valid"] and load["thread"] < self.threads:
            self.mem[load["thread"]][load["addr"] % self.depth] = load["inst"]
        start = inputs["start"]
        if start["valid"]:
            for t in range(self.threads):
                if (start["mask"] >> t) & 1:
                    self.pc[t] = 0
                    self.passes[t] = start["passes"]
                    self.active[t] = int(start["passes"] != 0)
                    self.cnt[t] = [0] * REGS
                    self.held[t] = [0] * REGS
