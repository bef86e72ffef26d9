"""Instruction-level golden model: register tiles in, the destination tile out.

A **family** (:data:`gpurtl.facts.matrix.FAMILIES`) is the set of instructions one matrix-core
build runs; a transaction names one of them by its position ``op`` and carries whole operand
tiles as VGPR words (``a``, ``b``, ``c``: lists of VGPRs, each a list of 32 lane words; ``idx``:
the index VGPR). Operands shorter than the family's widest use its first VGPRs; the rest are
ignored. Integer families also carry ``a_signed``, ``b_signed`` (the ``neg_lo[0]`` and
``neg_lo[1]`` bits of the integer forms) and ``clamp``; float families ``neg_lo`` and ``neg_hi``
(3 bits each, :data:`gpurtl.facts.matrix.FLOAT_MODIFIERS`: applied to the operand words before
they are decoded; bits an instruction does not take are ignored).

:func:`execute` is the vectorised core; :class:`MatrixModel` wraps it for the registry.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gpurtl.facts.matrix import (
    FORMATS,
    TILE,
    family_shape,
    family_variants,
    float_modifiers,
    operand_chunk,
)

from . import layouts
from .arith import dot, int_dot
from .presets import preset as get_preset

__all__ = ["family_variants", "family_shape", "execute", "matrices", "modified", "MatrixModel"]


def _width(name):
    return FORMATS[name].bits


def matrices(variant, a_words, b_words, c_words, idx_words=None, index_key=0):
    """Decode operand words (batched) into ``(A_stored, B, C, idx)`` element patterns."""
    v = variant
    a = layouts.unpack_a(v, a_words)
    b = layouts.unpack_b(v, b_words)
    c = layouts.unpack_cd(np.asarray(c_words)[..., : v.cd_vgprs, :], _width(v.cd))
    idx = None
    if v.sparse:
        key = np.asarray(index_key) if v.index_keys > 1 else np.zeros_like(np.asarray(index_key))
        idx = layouts.unpack_index(
            np.asarray(idx_words), v.k_stored, key, chunk=operand_chunk(v, "a")
        )
    return a, b, c, idx


def _bit(flags, i):
    """Bit ``i`` of ``flags`` (batched), shaped to broadcast against ``(..., vgprs, 32)``."""
    return ((np.asarray(flags, np.int64) >> i) & 1)[..., None, None]


def modified(variant, a_words, b_words, c_words, neg_lo=0, neg_hi=0):
    """Operand words after the float source modifiers (``neg_lo`` / ``neg_hi``, batched)."""
    v = variant
    ab, cm = float_modifiers(v)
    a_words, b_words = np.asarray(a_words, np.int64), np.asarray(b_words, np.int64)
    c_words = np.asarray(c_words, np.int64)
    if ab:  # bit 15 / bit 31: the sign of the element in the low / high half of each VGPR
        a_words = a_words ^ (_bit(neg_lo, 0) << 15) ^ (_bit(neg_hi, 0) << 31)
        b_words = b_words ^ (_bit(neg_lo, 1) << 15) ^ (_bit(neg_hi, 1) << 31)
    if cm:  # every C element: absolute value first, then negation
        signs = 0x80000000 if _width(v.cd) == 32 else 0x80008000
        c_words = c_words & ~(_bit(neg_hi, 2) * signs) ^ (_bit(neg_lo, 2) * signs)
    return a_words, b_words, c_words


def execute(
    variant,
    preset,
    a_words,
    b_words,
    c_words,
    idx_words=None,
    index_key=0,
    a_signed=1,
    b_signed=1,
    clamp=0,
    neg_lo=0,
    neg_hi=0,
):
    """D words ``(..., cd_vgprs, 32)`` of one instruction over a batch of operand tiles."""
    v = variant
    p = get_preset(preset) if isinstance(preset, str) else preset
    a_words, b_words, c_words = modified(v, a_words, b_words, c_words, neg_lo, neg_hi)
    a, b, c, idx = matrices(v, a_words, b_words, c_words, idx_words, index_key)
    if v.sparse:
        b_rows = layouts.select_b(b, idx)  # (..., m, n, s)
    else:
        b_rows = np.broadcast_to(
            np.swapaxes(b, -1, -2)[..., None, :, :], a.shape[:-2] + (TILE,) * 2 + (v.k_stored,)
        )
    a_rows = np.broadcast_to(a[..., :, None, :], b_rows.shape)
    if v.is_int:
        shape = c.shape
        extra = np.ones(shape, np.int64)
        d = int_dot(
            a_rows,
            b_rows,
            c,
            _width(v.a),
            _width(v.b),
            np.asarray(a_signed)[..., None, None] * extra,
            np.asarray(b_signed)[..., None, None] * extra,
            np.asarray(clamp)[..., None, None] * extra,
            v.k_stored,
        )
    else:
        d = dot(p.algorithm(v.a), a_rows, b_rows, c, v.a, v.b, v.cd)
    return layouts.pack_cd(d, _width(v.cd))


class MatrixModel:
    """Golden model of a family under a preset: ``model(tx)`` and ``model.batch(txs)``."""

    def __init__(self, family: str, preset: str = "rdna4") -> None:
        self.family = family
        self.variants = family_variants(family)
        self.shape = family_shape(family)
        self.preset = get_preset(preset)

    def __call__(self, tx: dict[str, Any]) -> dict[str, Any]:
        return self.batch([tx])[0]

    def batch(self, txs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if not txs:
            return []
        out: list[Any] = [None] * len(txs)
        ops = np.array([int(tx["op"]) for tx in txs])
        for op in np.unique(ops):
            sel = np.nonzero(ops == op)[0]
            group = [txs[i] for i in sel]
            v = self.variants[op]

            def arr(name, default=None):
                return np.array([tx.get(name, default) for tx in group], np.int64)

            ints = self.shape["is_int"]
            d = execute(
                v,
                self.preset,
                arr("a"),
                arr("b"),
                arr("c"),
                arr("idx"),
                arr("index_key"),
                arr("a_signed") if ints else 1,
                arr("b_signed") if ints else 1,
                arr("clamp") if ints else 0,
                0 if ints else arr("neg_lo", 0),
                0 if ints else arr("neg_hi", 0),
            )
            nd = self.shape["c"]
            for row, i in enumerate(sel):
                words = d[row].tolist()
                words += [[0] * 32] * (nd - len(words))
                out[i] = {"d": words}
        return out
