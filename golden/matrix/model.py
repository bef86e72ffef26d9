"""Instruction-level golden model: register tiles in, the destination tile out.

A **family** (:data:`gpurtl.facts.matrix.FAMILIES`) is the set of instructions one matrix-core
build runs; a transaction names one of them by its position ``op`` and carries whole operand
tiles as VGPR words (``a``, ``b``, ``c``: lists of VGPRs, each a list of 32 lane words; ``idx``:
the index VGPR). Operands shorter than the family's widest use its first VGPRs; the rest are
ignored. Integer families also carry ``a_signed``, ``b_signed`` (the ``neg_lo[0]`` and
``neg_lo[1]`` bits of the integer forms) and ``clamp``.

:func:`execute` is the vectorised core; :class:`MatrixModel` wraps it for the registry.
"""

import numpy as np

from gpurtl.facts.matrix import FORMATS, TILE, family_shape, family_variants

from . import layouts
from .arith import dot, int_dot
from .presets import preset as get_preset

__all__ = ["family_variants", "family_shape", "execute", "matrices", "MatrixModel"]


def _width(name):
    return FORMATS[name].bits


def matrices(variant, a_words, b_words, c_words, idx_words=None, index_key=0):
    """Decode operand words (batched) into ``(A_stored, B, C, idx)`` element patterns."""
    v = variant
    a = layouts.unpack_rows(np.asarray(a_words)[..., : v.a_vgprs, :], _width(v.a), v.k_stored)
    bt = layouts.unpack_rows(np.asarray(b_words)[..., : v.b_vgprs, :], _width(v.b), v.k)
    b = np.swapaxes(bt, -1, -2)
    c = layouts.unpack_cd(np.asarray(c_words)[..., : v.cd_vgprs, :], _width(v.cd))
    idx = None
    if v.sparse:
        key = np.asarray(index_key) if v.index_keys > 1 else np.zeros_like(np.asarray(index_key))
        idx = layouts.unpack_index(np.asarray(idx_words), v.k_stored, key)
    return a, b, c, idx


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
):
    """D words ``(..., cd_vgprs, 32)`` of one instruction over a batch of operand tiles."""
    v = variant
    p = get_preset(preset) if isinstance(preset, str) else preset
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

    def __init__(self, family, preset="rdna4"):
        self.family = family
        self.variants = family_variants(family)
        self.shape = family_shape(family)
        self.preset = get_preset(preset)

    def __call__(self, tx):
        return self.batch([tx])[0]

    def batch(self, txs):
        if not txs:
            return []
        out = [None] * len(txs)
        ops = np.array([int(tx["op"]) for tx in txs])
        for op in np.unique(ops):
            sel = np.nonzero(ops == op)[0]
            group = [txs[i] for i in sel]
            v = self.variants[op]

            def arr(name):
                return np.array([tx[name] for tx in group], np.int64)

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
            )
            nd = self.shape["c"]
            for row, i in enumerate(sel):
                words = d[row].tolist()
                words += [[0] * 32] * (nd - len(words))
                out[i] = {"d": words}
        return out
