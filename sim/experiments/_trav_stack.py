"""The LDS traversal stack seen by the traversal loop: ``ds_bvh_stack_*`` on one lane.

The loop calls :func:`stack_op` with the arguments of the project's golden model
``gpurtl.golden.ray_accel.ds_bvh_stack.ds_bvh_stack``; when that module is installed it does
all the work (``SOURCE == "golden"``). Otherwise a reduced model of the same semantics runs here
(``SOURCE == "local"``), written from gpurt ``src/shaders/rtip3_ds_stack_emulation.hlsl`` and
AMD's "RDNA4 Instruction Set Architecture" guide section 16.15: a ring of ``stack_size`` entries
per lane, 32 DWORDs apart; push order slot 7 to slot 0 then one pop; special pointers skip
slots; a walk-back (``last_node_ptr`` a real node) pushes only the siblings after it; the
primitive-range update; the TLAS/BLAS boundary on instance pops; the second pop of the ``pop2``
form stays inside the current BVH.
"""

__all__ = [
    "PUSH4_POP1",
    "PUSH8_POP1",
    "PUSH8_POP2",
    "SOURCE",
    "LdsMemory",
    "initial_stack_addr",
    "stack_op",
    "unpack_stack_addr",
]

PUSH4_POP1, PUSH8_POP1, PUSH8_POP2 = 224, 225, 226
_INVALID, _TERMINAL = 0xFFFFFFFF, 0xFFFFFFFE

try:    # the golden model, when this checkout has it
    from gpurtl.golden.ray_accel import ds_bvh_stack as _golden
    SOURCE = "golden"
except ImportError:     # pragma: no cover - depends on the checkout
    _golden = None
    SOURCE = "local"


class _LocalLds:
    def __init__(self, dwords):
        self._mem = {}
        self.dwords = dwords

    def read(self, i):
        return self._mem.get(i, 0)

    def write(self, i, v):
        self._mem[i] = v & 0xFFFFFFFF


LdsMemory = _golden.LdsMemory if _golden is not None else _LocalLds


def unpack_stack_addr(reg):
    if _golden is not None:
        return _golden.unpack_stack_addr(reg)
    return {"valid_entries": reg & 31, "entries_to_tlas": (reg >> 5) & 31,
            "addr": (reg >> 10) & 31, "base": (reg >> 15) & 0x3FFF,
            "has_tlas": (reg >> 29) & 1, "has_overflowed": (reg >> 30) & 1,
            "blas2tlas_pop": (reg >> 31) & 1}


def _pack(f):
    return (f["valid_entries"] | f["entries_to_tlas"] << 5 | f["addr"] << 10 | f["base"] << 15
            | f["has_tlas"] << 29 | f["has_overflowed"] << 30 | f["blas2tlas_pop"] << 31)


def initial_stack_addr(base):
    """The ADDR register of an empty stack whose entry 0 is LDS DWORD ``base``."""
    fields = {"valid_entries": 0, "entries_to_tlas": 0, "addr": 0, "base": base, "has_tlas": 0,
              "has_overflowed": 0, "blas2tlas_pop": 0}
    return _golden.pack_stack_addr(fields) if _golden is not None else _pack(fields)


def _special(p):
    return (p >> 3) == 0x1FFFFFFF


def _local(op, reg, last, data, lds, size, prim_range):
    f = unpack_stack_addr(reg)
    f["blas2tlas_pop"] = 0

    def push(v):
        if f["valid_entries"] == size:
            f["has_overflowed"] = 1
        lds.write(f["base"] + 32 * f["addr"], v)
        f["addr"] = (f["addr"] + 1) % size
        if f["entries_to_tlas"] == size:
            f["has_tlas"] = 0
        f["entries_to_tlas"] = min(f["entries_to_tlas"] + 1, size)
        f["valid_entries"] = min(f["valid_entries"] + 1, size)

    def pop():
        if f["entries_to_tlas"] == 0 and f["has_tlas"]:
            f["blas2tlas_pop"] = 1
            f["has_tlas"] = 0
        if f["valid_entries"] == 0:
            return _INVALID if f["has_overflowed"] else _TERMINAL
        f["valid_entries"] -= 1
        f["entries_to_tlas"] = max(f["entries_to_tlas"] - 1, 0)
        f["addr"] = (f["addr"] - 1) % size
        v = lds.read(f["base"] + 32 * f["addr"])
        if v & 7 == 6:
            if f["has_tlas"]:
                f["valid_entries"] = f["entries_to_tlas"]
                f["has_overflowed"] = 1
            f["has_tlas"], f["entries_to_tlas"] = 1, 0
        return v

    walkback = not _special(last)
    slots = 4 if op == PUSH4_POP1 else 8
    if prim_range and not (last & 4) and not walkback:
        nav, ptr = last & 3, data[7]
        if not nav & 2:
            ptr = (ptr & ~0xF) + 0x10 if nav == 1 else (ptr ^ 0xB if ptr & 0xF == 3 else ptr + 1)
            push(ptr)
    else:
        hits = [not _special(data[i]) and (data[i] == last or (data[i] & 7) <= 3)
                for i in range(slots)]
        valid = not walkback or any(hits)
        skip_lo = skip_hi = False
        for i in reversed(range(slots)):
            v = data[i]
            if walkback and hits[i]:
                valid = False
            if _special(v):
                skip_lo |= not v & 2
                skip_hi |= not v & 4
                continue
            if (skip_hi if i >= 4 else skip_lo) or not valid:
                continue
            push(v)
    first = pop()
    if op != PUSH8_POP2:
        return _pack(f), first
    second = _INVALID
    if not _special(first):
        if first & 7 == 1:
            second = first & ~7
        elif f["valid_entries"] and not (f["has_tlas"] and f["entries_to_tlas"] == 0):
            second = pop()
    return _pack(f), (first, second)


def stack_op(op, stack_addr, last_node_ptr, data, lds, *, stack_size, prim_range=False):
    """``(new_stack_addr, dst)`` of one lane's stack instruction (``dst`` a pair for pop2)."""
    if _golden is not None:
        return _golden.ds_bvh_stack(op, stack_addr, last_node_ptr, data, lds,
                                    stack_size=stack_size, prim_range=prim_range)
    return _local(op, stack_addr, last_node_ptr, list(data), lds, stack_size, prim_range)
