"""Golden model of the LDS BVH stack instructions ``ds_bvh_stack_push{4,8}_pop{1,2}_rtn``.

Authority: GPUOpen gpurt ``src/shaders/rtip3_ds_stack_emulation.hlsl`` (``push``, ``pop``,
``try_pop``, ``update_primitive_range``, ``ds_stack_push8_impl``,
``ds_stack_push8_pop1_emulation``, ``ds_stack_push8_pop2_emulation``), cross-read with the AMD
"RDNA4 Instruction Set Architecture" guide section 16.15 (VDS opcodes 224-226), whose pseudocode
is the mirror image of the emulation: the guide's DATA1[i] is slot 7 - i here, and slot 0 is the
child to visit first.

One lane's instruction (:func:`ds_bvh_stack`):

1. Push. The slots of DATA1 are processed from slot 7 (farthest) down to slot 0 (closest); each
   one that survives the rules below is pushed on a ring of ``stack_size`` entries. Entry ``k``
   of the ring lives at LDS DWORD ``base + 32 * k`` (the lanes of a wave32 interleave, 128 bytes
   between a lane's consecutive entries). Pushing onto a full ring overwrites the oldest entry
   and sets ``has_overflowed``.

   * Walk-back: ``last_node_ptr`` not a special value (``last >> 3 != 0x1FFFFFFF``) means the
     shader is walking back up the tree after an overflow; ``last_node_ptr`` is the child it
     visited last. Only the slots processed before the one equal to it (the siblings farther
     than the last visited child) are pushed; nothing at all when no slot equals it.
   * Special values (``0xFFFFFFF8..F``) are never pushed. Processed with data valid, one with
     bit 1 clear stops slots 0-3 (``SKIP_0_3``) and, among slots 7-4, one with bit 2 clear stops
     the rest of slots 7-4 (``SKIP_4_7``): the intersection engines use them to hand over fewer
     than eight children.
   * RT IP 3.1 rules (PUSH8_POP1 with OFFSET1[1] set): a triangle pointer
     (``(ptr & 7) <= 3``) in a slot counts as a walk-back match, and a triangle
     ``last_node_ptr`` keeps the data valid (primitives sort first, so all of them are
     re-tested). A primitive-range update (``last_node_ptr = 0xFFFFFFF8 | nav``, bit 2 clear):
     slot 7 holds the current triangle pair and is replaced by its successor before the push
     (``NAV_END_OF_PAIR``: next pair, type 3 becomes 8; ``NAV_END_OF_NODE``: pair 0 of the next
     128-byte node), every other slot is skipped; ``NAV_END_OF_RANGE`` pushes nothing.

2. Pop. From an empty stack: ``INVALID_NODE`` if entries were lost (the shader then walks back
   through parent pointers), else ``TERMINAL_NODE``; both clear ``has_tlas`` and
   ``blas2tlas_pop``. Otherwise the top entry. ``blas2tlas_pop`` is set when the pop crosses
   back from a BLAS into the TLAS part of the stack (``entries_to_tlas == 0`` with ``has_tlas``).
   Popping an instance node (type 6) starts a BLAS: ``entries_to_tlas = 0`` and ``has_tlas``
   set; if the stack already held a TLAS part, that part is dropped (``valid_entries =
   entries_to_tlas``) and ``has_overflowed`` set, so walk-back recovers it.

3. PUSH8_POP2 then makes a second pop for the second intersection engine: if the first popped
   pointer is a ``TRIANGLE_1`` node, the second is the same pointer with its type cleared (the
   other triangle of the pair) and is returned in ``dst0``; otherwise ``try_pop``: it never
   pops an instance node nor across the TLAS boundary nor from an empty stack, and gives
   ``INVALID_NODE`` instead; the emulation returns ``(try_pop, first)`` and moves an invalid
   ``try_pop`` result into ``dst1``.

Choices where the sources are silent (the emulation is for stack size 16 and the RT IP level
decides the 3.1 rules):

* OFFSET1[1] (primitive range enable) selects the RT IP 3.1 rules for PUSH8_POP1. PUSH8_POP2 uses
  the 3.0 rules whatever the bit (the emulation calls it with ``GPURT_RTIP3_0``), and so does
  PUSH4_POP1, the RDNA 3 instruction, modelled as PUSH8_POP1 with DATA1 slots 4-7 holding
  ``INVALID_NODE`` (they are then never pushed and never match).
* OFFSET1[0] (triangle size optimization) has no public semantics and no effect here.
* ``stack_size`` is OFFSET0[4:0], 1..31; the ring arithmetic of the emulation is used as is for
  any size (an ``addr`` field at or above the size steps on to ``addr + 1`` and wraps at 32 when
  packed, exactly as the emulation does).
* The block model :class:`BvhStackModel` refuses (``error = 1``, nothing written, the register
  returned unchanged, both results ``INVALID_NODE``) a register whose ring does not lie inside
  its LDS or whose ``addr``, ``valid_entries`` or ``entries_to_tlas`` exceed the stack size
  (values the instructions never produce), and an opcode that is not one of the three.
"""

from gpurtl.facts.ds_bvh_stack import (
    BASE_BITS,
    INVALID_NODE,
    NODE_TYPE_INSTANCE,
    NODE_TYPE_TRIANGLE_1,
    SPECIAL_NODE_PREFIX,
    STACK_SIZE_MAX,
    STACK_STRIDE_DWORDS,
    TERMINAL_NODE,
    StackOp,
    node_type,
)

__all__ = [
    "StackOp",
    "FIELDS",
    "unpack_stack_addr",
    "pack_stack_addr",
    "LdsMemory",
    "push_slots",
    "ds_bvh_stack",
    "BvhStackModel",
]

#: Register fields: (name, low bit, width), gpurt ``pack_stack_addr``.
FIELDS = (
    ("valid_entries", 0, 5),
    ("entries_to_tlas", 5, 5),
    ("addr", 10, 5),
    ("base", 15, BASE_BITS),
    ("has_tlas", 29, 1),
    ("has_overflowed", 30, 1),
    ("blas2tlas_pop", 31, 1),
)


def unpack_stack_addr(reg):
    """The fields of a packed 32-bit stack-address register, as a dictionary of ints."""
    return {name: (reg >> low) & ((1 << width) - 1) for name, low, width in FIELDS}


def pack_stack_addr(fields):
    """The 32-bit register of a field dictionary (every field masked to its width)."""
    reg = 0
    for name, low, width in FIELDS:
        reg |= (int(fields[name]) & ((1 << width) - 1)) << low
    return reg


class LdsMemory:
    """DWORD-addressed local data share: ``dwords`` 32-bit words, all zero at first.

    Parameters
    ----------
    dwords : int
        Size in DWORDs.
    """

    def __init__(self, dwords):
        if not isinstance(dwords, int) or dwords <= 0:
            raise ValueError(f"`dwords` must be a positive integer, not {dwords!r}")
        self._words = [0] * dwords

    @property
    def dwords(self):
        return len(self._words)

    def read(self, index):
        """The DWORD at ``index``; IndexError outside the memory."""
        if not 0 <= index < len(self._words):
            raise IndexError(f"LDS DWORD {index} outside 0..{len(self._words) - 1}")
        return self._words[index]

    def write(self, index, value):
        """Store ``value`` (32 bits) at ``index``; IndexError outside the memory."""
        if not 0 <= index < len(self._words):
            raise IndexError(f"LDS DWORD {index} outside 0..{len(self._words) - 1}")
        self._words[index] = value & 0xFFFFFFFF


def _is_special(ptr):
    return (ptr >> 3) == SPECIAL_NODE_PREFIX


def _next_primitive(ptr, end_of_node):
    """gpurt ``update_primitive_range``: the pointer after ``ptr`` in a primitive range."""
    if end_of_node:
        return ((ptr & ~0xF) + 0x10) & 0xFFFFFFFF
    # Pair types are 0-3 and 8-11 (bits 0, 1 and 3): pair 3 goes on to pair 4 (type 8).
    return (ptr ^ 0xB) if (ptr & 0xF) == 3 else (ptr + 1) & 0xFFFFFFFF


def push_slots(last_node_ptr, data, *, rules31):
    """The pointers an instruction pushes, in push order (slot 7 first).

    ``data`` holds 8 DWORDs. ``rules31`` enables the RT IP 3.1 rules (triangle matches and
    primitive-range updates). This is gpurt ``ds_stack_push8_impl`` without the stack.
    """
    walkback = (last_node_ptr >> 3) != SPECIAL_NODE_PREFIX
    match = [d == last_node_ptr or (rules31 and node_type(d) <= 3) for d in data]
    data_valid = not walkback or any(match)
    range_update = False
    if rules31:
        range_update = not (last_node_ptr & 4) and not walkback
        range_end = range_update and bool(last_node_ptr & 2)
        last_is_prim = node_type(last_node_ptr) <= 3
        data_valid = (data_valid or last_is_prim) and not range_end
    skip_0_3 = skip_4_7 = False
    pushed = []
    for slot in range(7, -1, -1):
        node = data[slot]
        special = _is_special(node)
        if slot >= 4:
            if special and data_valid and not skip_4_7:
                skip_0_3 |= not (node & 2)
                skip_4_7 |= not (node & 4)
            if slot == 6 and range_update:
                skip_0_3 = skip_4_7 = True
            skip = skip_4_7
        else:
            if special and data_valid:
                skip_0_3 |= not (node & 2)
            skip = skip_0_3
        if walkback and match[slot]:
            data_valid = False
        if data_valid and not special and not skip:
            if slot == 7 and range_update:
                node = _next_primitive(node, last_node_ptr & 1)
            pushed.append(node)
    return pushed


def _push(s, node, lds, size):
    if s["valid_entries"] == size:
        s["has_overflowed"] = 1
    lds.write(s["base"] + s["addr"] * STACK_STRIDE_DWORDS, node)
    s["addr"] = 0 if s["addr"] == size - 1 else s["addr"] + 1
    if s["entries_to_tlas"] == size:
        s["has_tlas"] = 0
    s["entries_to_tlas"] = min(s["entries_to_tlas"] + 1, size)
    s["valid_entries"] = min(s["valid_entries"] + 1, size)


def _pop(s, lds, size):
    s["blas2tlas_pop"] = int(s["entries_to_tlas"] == 0 and bool(s["has_tlas"]))
    if s["blas2tlas_pop"]:
        s["has_tlas"] = 0
    if s["valid_entries"] == 0:
        s["blas2tlas_pop"] = s["has_tlas"] = 0
        return INVALID_NODE if s["has_overflowed"] else TERMINAL_NODE
    s["entries_to_tlas"] = max(s["entries_to_tlas"] - 1, 0)
    s["valid_entries"] -= 1
    s["addr"] = size - 1 if s["addr"] == 0 else s["addr"] - 1
    node = lds.read(s["base"] + s["addr"] * STACK_STRIDE_DWORDS)
    if node_type(node) == NODE_TYPE_INSTANCE:
        # A second BVH level below a TLAS already on the stack: drop the TLAS part and let
        # walk-back recover it.
        if s["has_tlas"]:
            s["valid_entries"] = s["entries_to_tlas"]
            s["has_overflowed"] = 1
        s["has_tlas"] = 1
        s["entries_to_tlas"] = 0
    return node


def _try_pop(s, lds, size):
    if (s["entries_to_tlas"] == 0 and s["has_tlas"]) or s["valid_entries"] == 0:
        return INVALID_NODE
    addr = size - 1 if s["addr"] == 0 else s["addr"] - 1
    node = lds.read(s["base"] + addr * STACK_STRIDE_DWORDS)
    if node_type(node) == NODE_TYPE_INSTANCE:
        return INVALID_NODE
    s["addr"] = addr
    s["entries_to_tlas"] = max(s["entries_to_tlas"] - 1, 0)
    s["valid_entries"] -= 1
    return node


def _check_stack_size(stack_size):
    if not isinstance(stack_size, int) or not 1 <= stack_size <= STACK_SIZE_MAX:
        raise ValueError(
            f"`stack_size` must be an integer from 1 to {STACK_SIZE_MAX}, not {stack_size!r}"
        )


def ds_bvh_stack(
    op, stack_addr, last_node_ptr, data, lds, *, stack_size, tri_size_opt=False, prim_range=False
):
    """One lane's stack instruction.

    Parameters
    ----------
    op : StackOp or int
        The opcode.
    stack_addr : int
        The packed stack-address register (ADDR VGPR).
    last_node_ptr : int
        DATA0.
    data : sequence of int
        DATA1: 8 DWORDs, the intersection result DW0..7 (PUSH4_POP1 reads DW0..3 only).
    lds : LdsMemory
        The LDS; written by the pushes.
    stack_size : int
        OFFSET0[4:0], 1..31.
    tri_size_opt : bool
        OFFSET1[0]; no effect (its semantics are not public).
    prim_range : bool
        OFFSET1[1]; the RT IP 3.1 rules for PUSH8_POP1.

    Returns
    -------
    (int, int or tuple)
        The new register, and the popped pointer (pop1 forms) or the pair ``(dst0, dst1)``
        (PUSH8_POP2).
    """
    op = StackOp(op)
    _check_stack_size(stack_size)
    data = [int(d) & 0xFFFFFFFF for d in data]
    if len(data) != 8:
        raise ValueError(f"`data` must hold 8 DWORDs, not {len(data)}")
    last_node_ptr &= 0xFFFFFFFF
    if op == StackOp.PUSH4_POP1:
        data = data[:4] + [INVALID_NODE] * 4
    rules31 = op == StackOp.PUSH8_POP1 and bool(prim_range)
    s = unpack_stack_addr(stack_addr)
    for node in push_slots(last_node_ptr, data, rules31=rules31):
        _push(s, node, lds, stack_size)
    first = _pop(s, lds, stack_size)
    if op != StackOp.PUSH8_POP2:
        return pack_stack_addr(s), first
    if node_type(first) == NODE_TYPE_TRIANGLE_1:
        pair = (first & ~7, first)
    else:
        second = _try_pop(s, lds, stack_size)
        pair = (first, INVALID_NODE) if second == INVALID_NODE else (second, first)
    return pack_stack_addr(s), pair


def _field_value(value):
    return value.value if hasattr(value, "value") else int(value)


class BvhStackModel:
    """Golden model of the ``ds_bvh_stack`` block: one lane's instruction per transaction.

    The LDS holds ``waves`` regions of ``stack_size`` rows of 32 DWORDs (one DWORD per lane of a
    wave32); lane ``l`` of wave ``w`` has ``base = 32 * stack_size * w + l``. Only lanes below
    ``lanes`` exist. Transactions are processed in order; the LDS keeps its contents between
    them.

    Parameters
    ----------
    stack_size : int
        OFFSET0, the ring size of every lane (the block supports 8, 16 and 24).
    waves : int
        Waves with a stack region in the LDS.
    lanes : int
        Lanes per wave (a power of two up to 32).
    """

    def __init__(self, *, stack_size=16, waves=2, lanes=32):
        _check_stack_size(stack_size)
        if not isinstance(waves, int) or waves < 1:
            raise ValueError(f"`waves` must be a positive integer, not {waves!r}")
        if lanes not in (1, 2, 4, 8, 16, 32):
            raise ValueError(f"`lanes` must be a power of two from 1 to 32, not {lanes!r}")
        self._stack_size, self._waves, self._lanes = stack_size, waves, lanes
        self.lds = LdsMemory(waves * stack_size * STACK_STRIDE_DWORDS)

    @property
    def stack_size(self):
        return self._stack_size

    @property
    def waves(self):
        return self._waves

    @property
    def lanes(self):
        return self._lanes

    def base_of(self, wave, lane):
        """The ``base`` field of lane ``lane`` of wave ``wave``."""
        return wave * self._stack_size * STACK_STRIDE_DWORDS + lane

    def fits(self, fields):
        """Whether a register (field dictionary) is one this block accepts."""
        size = self._stack_size
        row, lane = divmod(fields["base"], STACK_STRIDE_DWORDS)
        return (
            lane < self._lanes
            and row + size <= self._waves * size
            and fields["addr"] < size
            and fields["valid_entries"] <= size
            and fields["entries_to_tlas"] <= size
        )

    def __call__(self, request):
        reg = request["stack_addr"]
        fields = (
            unpack_stack_addr(reg)
            if isinstance(reg, int)
            else {name: _field_value(reg[name]) for name, _, _ in FIELDS}
        )
        op = request["op"]
        try:
            op = StackOp[op] if isinstance(op, str) else StackOp(_field_value(op))
        except (KeyError, ValueError):
            op = None  # not a stack opcode: refused like a bad register
        if op is None or not self.fits(fields):
            return {
                "stack_addr": dict(fields),
                "dst0": INVALID_NODE,
                "dst1": INVALID_NODE,
                "error": 1,
            }
        new, dst = ds_bvh_stack(
            op,
            pack_stack_addr(fields),
            int(request["last_node_ptr"]),
            [int(d) for d in request["data"]],
            self.lds,
            stack_size=self._stack_size,
            tri_size_opt=bool(request.get("tri_size_opt", 0)),
            prim_range=bool(request.get("prim_range", 0)),
        )
        dst0, dst1 = dst if op == StackOp.PUSH8_POP2 else (dst, INVALID_NODE)
        return {"stack_addr": unpack_stack_addr(new), "dst0": dst0, "dst1": dst1, "error": 0}

    def rows(self, words):
        """:meth:`__call__` on word rows of ``STACK_REQUEST_LAYOUT``, in order (the LDS carries
        over); ``STACK_RESPONSE_LAYOUT`` word rows. The fields are read and written a column at
        a time, so a long run spends its time in the instructions, not in the packing."""
        import numpy as np

        from gpurtl.facts.ds_bvh_stack import STACK_REQUEST_LAYOUT, STACK_RESPONSE_LAYOUT

        from .vector.bitfields import FieldWriter, field_span, read_fields

        def column(*path):
            offset, width = field_span(STACK_REQUEST_LAYOUT, *path)
            return read_fields(words, [offset], width)[:, 0].tolist()

        ops, regs = column("op"), column("stack_addr")
        lasts, ranges = column("last_node_ptr"), column("prim_range")
        data = read_fields(
            words, [field_span(STACK_REQUEST_LAYOUT, "data", k)[0] for k in range(8)], 32
        ).tolist()
        out = np.zeros((len(ops), 4), np.int64)
        codes = {int(op) for op in StackOp}
        for k, (op, reg) in enumerate(zip(ops, regs)):
            fields = unpack_stack_addr(reg)
            if op not in codes or not self.fits(fields):
                out[k] = reg, INVALID_NODE, INVALID_NODE, 1
                continue
            new, dst = ds_bvh_stack(
                op,
                reg,
                lasts[k],
                data[k],
                self.lds,
                stack_size=self._stack_size,
                prim_range=bool(ranges[k]),
            )
            dst0, dst1 = dst if op == StackOp.PUSH8_POP2 else (dst, INVALID_NODE)
            out[k] = new, dst0, dst1, 0
        result = FieldWriter(len(ops), STACK_RESPONSE_LAYOUT)
        for j, name in enumerate(("stack_addr", "dst0", "dst1", "error")):
            result.write(*field_span(STACK_RESPONSE_LAYOUT, name), out[:, j])
        return result.words()
