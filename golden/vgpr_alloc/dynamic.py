"""Cycle-stepped golden model of the RDNA 4 dynamic-VGPR block allocator of one SIMD.

Facts (AMD "RDNA4 Instruction Set Architecture" guide section 3.3.3 "Dynamic VGPR allocation";
LLVM ``llvm/lib/Target/AMDGPU/SOPInstructions.td`` ``S_ALLOC_VGPR``, ``SIInsertWaitcnts.cpp``;
Linux ``drivers/gpu/drm/amd/include/asic_reg/gc/gc_12_0_0_sh_mask.h`` ``SQ_DYN_VGPR``):

* the register file holds 1536 (gfx1200/gfx1201) or 1024 VGPRs per SIMD (LLVM
  ``AMDGPUBaseInfo.cpp`` ``getTotalNumVGPRs``);
* blocks are 16 or 32 VGPRs (``SQ_DYN_VGPR.BLOCK_SIZE``), a wave holds 1..8 blocks
  (``MAX_BLOCK_ALLOC``), each enabled wave slot (``WAVE_LIMIT``) owns one reserved block that a
  launched wave starts with (ISA guide 3.3.3; Chips and Cheese, "Dynamic Register Allocation on
  AMD's RDNA 4 GPU Architecture", 2025);
* ``s_alloc_vgpr n`` asks for ``n[8:0]`` VGPRs in total, rounded up to whole blocks; growth is all
  or nothing, SCC reports success, shrink and no change always succeed (ISA guide 3.3.3);
* at wave end the hardware frees everything (the ``SIInsertWaitcnts.cpp`` comment on the
  ``s_alloc_vgpr 0`` it emits before ``s_endpgm``).

Choices where the sources are silent:

* a request of 0 VGPRs mid-program keeps one block (the ISA guide's minimum of one block);
* a request above ``max_blocks`` blocks is misuse: ``OVER_MAX``, no change, SCC = 0;
* deadlock avoidance (``SQ_DYN_VGPR.FWD_PROGRESS``) follows the Chips and Cheese article's reading
  of the ISA text: ``reserve`` blocks of the shared pool (default ``max_blocks - 1`` = 7) are kept
  back. A growth request is granted from the general part when at least ``reserve`` free blocks
  remain after it; otherwise it may draw on the reserve only when no other wave holds the reserve,
  and the wave that does becomes the *holder*. The holder is released when the free count is back at
  ``reserve`` or more, or when the holder ends. With ``reserve >= max_blocks - 1`` this keeps the
  invariant that the holder (or, with no holder, any wave) can always grow to ``max_blocks``.

Physical organisation (a model choice: blocks need not be contiguous): blocks ``0 .. wave_limit-1``
are the slot blocks (slot ``s`` owns block ``s``); the other blocks form the shared pool, kept in a
free stack. A grant pops blocks from the top of the stack into the wave's block table; a shrink or
an end pushes the released table entries back, lowest logical block first. VGPR ``v`` of wave ``w``
lives in physical row ``table[w][v // B] * B + v % B``.
"""

from __future__ import annotations

from typing import Any

from gpurtl.facts.vgpr_alloc import DYN_DEFAULTS as _D
from gpurtl.facts.vgpr_alloc import dyn_params_ok

from .common import ERR, OP, as_op

__all__ = ["DynVgprModel"]


class DynVgprModel:
    """Golden model with ``step(inputs) -> outputs`` (see :mod:`gpurtl.facts.vgpr_alloc`).

    Parameters
    ----------
    rf_vgprs : int
        VGPRs (wave32 rows) per SIMD: 1536 or 1024.
    block_size : int
        16 or 32 VGPRs per block.
    wave_limit : int
        Enabled wave slots, 1..16.
    max_blocks : int
        Maximum blocks per wave, 1..8.
    fwd_progress : bool
        Deadlock avoidance on or off.
    reserve : int
        Blocks kept back by deadlock avoidance.
    assertions : bool
        Check the invariants after every step (raises AssertionError).
    """

    SLOTS = 16

    def __init__(
        self,
        rf_vgprs: int = _D.rf_vgprs,
        block_size: int = _D.block_size,
        wave_limit: int = _D.wave_limit,
        max_blocks: int = _D.max_blocks,
        fwd_progress: bool = _D.fwd_progress,
        reserve: int = _D.reserve,
        assertions: bool = True,
    ) -> None:
        dyn_params_ok(rf_vgprs, block_size, wave_limit, max_blocks, fwd_progress, reserve)
        self.B, self.wave_limit, self.max_blocks = block_size, wave_limit, max_blocks
        self.total = rf_vgprs // block_size
        self.pool = self.total - wave_limit
        self.R = reserve if fwd_progress else 0
        self.fwd_progress, self.assertions = fwd_progress, assertions
        self.stack = list(range(wave_limit, self.total))
        # table[w][0] is the slot block w; entries >= blocks[w] hold stale values
        self.table = [[w] + [0] * (max_blocks - 1) for w in range(self.SLOTS)]
        self.blocks = [0] * self.SLOTS
        self.holder = None

    # --- queries used by the experiments -------------------------------------------------------
    @property
    def free(self):
        return len(self.stack)

    def target(self, count):
        return max(1, -(-(count & 0x1FF) // self.B))

    def _general(self, k):
        return self.free >= k + self.R

    def _via_reserve(self, wave, k):
        return self.free >= k and (self.holder is None or self.holder == wave)

    # --- the clocked model ---------------------------------------------------------------------
    def outputs(self, ack, err, lk):
        valid, row = lk
        return {
            "ack": int(ack),
            "err": err,
            "free": self.free,
            "units": list(self.blocks),
            "lk_valid": int(valid),
            "lk_row": row,
            "holder_valid": int(self.holder is not None),
            "holder": 0 if self.holder is None else self.holder,
        }

    def translate(self, wave, reg):
        if wave >= self.wave_limit or self.blocks[wave] == 0:
            return False, 0
        j, off = divmod(reg, self.B)
        if j >= self.blocks[wave]:
            return False, 0
        return True, self.table[wave][j] * self.B + off

    def step(self, inputs: dict[str, Any]) -> dict[str, Any]:
        op, w, count = as_op(inputs["op"]), inputs["wave"], inputs["count"]
        out = self.outputs(0, ERR.NONE, self.translate(inputs["lk_wave"], inputs["lk_reg"]))
        if op == OP.NONE:
            self.check()
            return out
        cur = self.blocks[w] if w < self.SLOTS else 0
        if w >= self.wave_limit:
            out["err"] = ERR.BAD_SLOT
        elif op == OP.LAUNCH:
            if cur:
                out["err"] = ERR.SLOT_BUSY
            else:
                self.blocks[w] = 1
                out["ack"] = 1
        elif not cur:
            out["err"] = ERR.NOT_RESIDENT
        elif op == OP.END:
            self._release(w, 1, cur)
            self.blocks[w] = 0
            if self.holder == w:
                self.holder = None
            out["ack"] = 1
        else:  # ALLOC
            tgt = self.target(count)
            if tgt > self.max_blocks:
                out["err"] = ERR.OVER_MAX
            elif tgt <= cur:
                self._release(w, tgt, cur)
                self.blocks[w] = tgt
                out["ack"] = 1
            else:
                k = tgt - cur
                general = self._general(k)
                if general or self._via_reserve(w, k):
                    for j in range(cur, tgt):
                        self.table[w][j] = self.stack.pop()
                    self.blocks[w] = tgt
                    if not general:
                        self.holder = w
                    out["ack"] = 1
        if self.holder is not None and self.free >= self.R:
            self.holder = None
        self.check()
        return out

    def _release(self, w, first, cur):
        for j in range(first, cur):
            self.stack.append(self.table[w][j])

    # --- invariants ----------------------------------------------------------------------------
    def check(self):
        if not self.assertions:
            return
        seen = list(self.stack)
        idle = 0
        for w in range(self.wave_limit):
            b = self.blocks[w]
            assert 0 <= b <= self.max_blocks, f"wave {w} holds {b} blocks"
            if b == 0:
                idle += 1
            seen.extend(self.table[w][:b] if b else [w])
            assert b == 0 or self.table[w][0] == w
        for w in range(self.wave_limit, self.SLOTS):
            assert self.blocks[w] == 0
        assert sorted(seen) == list(range(self.total)), "a block is lost or owned twice"
        owned = sum(self.blocks)
        assert self.free + owned + idle == self.total
        if self.holder is not None:
            assert self.blocks[self.holder] > 0 and self.free < self.R
        if self.fwd_progress and self.R >= self.max_blocks - 1:
            need = self.max_blocks - (self.blocks[self.holder] if self.holder is not None else 1)
            assert self.free >= need, "the reserve no longer lets one wave reach the maximum"
