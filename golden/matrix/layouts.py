"""Wave32 VGPR layouts of the WMMA / SWMMAC operands: matrices <-> per-lane register words.

Every function is vectorised over leading batch axes. Element bit patterns are int64 arrays;
register words are int64 arrays of shape ``(..., vgprs, 32)`` (VGPR, lane), each a 32-bit value.

Layouts (AMD GPUOpen, "Using the Matrix Cores of AMD RDNA 4 architecture GPUs", for the
16x16x16 forms; the deeper forms and the index are inferred, see :mod:`gpurtl.facts.matrix`):

* **A** (16 x K, row-major in the maths) and **B** (K x 16): lane ``l`` holds row ``l % 16`` of
  A (column ``l % 16`` of B). Its ``K/2`` elements are, in order, ``k = 16 * (j // 8) + 8 * h +
  j % 8`` for ``j = 0 .. K/2 - 1`` and ``h = l // 16``: lanes 0-15 hold K 0-7 (16-23, ...), lanes
  16-31 K 8-15 (24-31, ...). Element ``j`` sits at bit ``j * width`` of the lane's bits, which run
  through the VGPRs in order (VGPR ``v`` holds lane bits ``32 v .. 32 v + 31``).
* **C / D** (16 x 16): lane ``l`` holds column ``l % 16``; its element ``j`` (``j = 0..7``) is row
  ``j + 8 * (l // 16)``. 32-bit elements take one VGPR each; 16-bit elements are packed two per
  VGPR, element ``j`` in the half ``j % 2`` of VGPR ``j // 2``.
* **Sparse A** (SWMMAC): the logical 16 x K matrix has at most two non-zeros in every group of
  four K; the stored 16 x K/2 matrix keeps two values per group (stored ``s = 2 g + t``) and the
  index gives each stored value's position ``0..3`` in its group (logical ``k = 4 g + idx``). The
  stored matrix is laid out as A; lane ``l`` holds the 2-bit indices of the stored elements it
  holds, element ``j`` at bits ``2 j .. 2 j + 1`` of the lane's index field: bits ``16 key ..
  16 key + 15`` of the index VGPR for K/2 = 16 stored (``index_key`` = ``key``), the whole VGPR
  for K/2 = 32 (``V_SWMMAC_I32_16X16X64_IU4``).
"""

import numpy as np

from gpurtl.facts.matrix import LANE_BITS, TILE, WAVE

__all__ = [
    "lane_k",
    "vgprs_for",
    "pack_rows",
    "unpack_rows",
    "pack_cd",
    "unpack_cd",
    "pack_index",
    "unpack_index",
    "compress",
    "expand",
    "select_b",
]


def lane_k(h, j):
    """Depth index of element ``j`` held by a lane of half ``h`` (0: lanes 0-15, 1: 16-31)."""
    return 16 * (j // 8) + 8 * h + j % 8


def vgprs_for(k, width):
    """VGPRs of an A/B operand with depth ``k`` and ``width``-bit elements."""
    return k * width // (2 * LANE_BITS)


def _lane_positions(k):
    """(32, k/2) array: the depth index of each lane's element ``j``."""
    j = np.arange(k // 2)
    h = np.arange(WAVE)[:, None] // TILE
    return lane_k(h, j[None, :])


def _to_words(lane_elems, width):
    """(..., 32, n) element patterns -> (..., vgprs, 32) words (element j at bit j*width)."""
    lane_elems = np.asarray(lane_elems, np.int64) & ((1 << width) - 1)
    n = lane_elems.shape[-1]
    per = LANE_BITS // width
    vg = -(-n // per)
    if vg * per != n:  # a part-filled last VGPR (a 16-bit index field)
        pad = np.zeros(lane_elems.shape[:-1] + (vg * per - n,), np.int64)
        lane_elems = np.concatenate([lane_elems, pad], axis=-1)
    grouped = lane_elems.reshape(lane_elems.shape[:-1] + (vg, per))
    shifts = (np.arange(per) * width).astype(np.int64)
    words = (grouped << shifts).sum(axis=-1)  # (..., 32, vg)
    return np.swapaxes(words, -1, -2)


def _from_words(words, width, n):
    """(..., vgprs, 32) words -> (..., 32, n) element patterns."""
    words = np.swapaxes(np.asarray(words, np.int64), -1, -2)  # (..., 32, vg)
    per = LANE_BITS // width
    shifts = (np.arange(per) * width).astype(np.int64)
    elems = (words[..., None] >> shifts) & ((1 << width) - 1)
    return elems.reshape(elems.shape[:-2] + (-1,))[..., :n]


def pack_rows(mat, width):
    """Words of an A-style operand: ``mat[..., r, k]`` (r = row of A or column of B)."""
    mat = np.asarray(mat, np.int64)
    k = mat.shape[-1]
    pos = _lane_positions(k)  # (32, k/2)
    rows = np.arange(WAVE) % TILE
    lane_elems = mat[..., rows[:, None], pos]  # (..., 32, k/2)
    return _to_words(lane_elems, width)


def unpack_rows(words, width, k):
    """Inverse of :func:`pack_rows`: ``(..., 16, k)`` element patterns."""
    words = np.asarray(words, np.int64)
    lane_elems = _from_words(words, width, k // 2)  # (..., 32, k/2)
    pos = _lane_positions(k)
    rows = np.arange(WAVE) % TILE
    out = np.zeros(words.shape[:-2] + (TILE, k), np.int64)
    out[..., rows[:, None], pos] = lane_elems
    return out


def _cd_rows():
    """(32, 8): the row of each lane's C/D element ``j``."""
    return np.arange(8)[None, :] + 8 * (np.arange(WAVE)[:, None] // TILE)


def pack_cd(mat, width):
    """Words of a C/D operand ``mat[..., m, n]`` with ``width`` = 32 or 16."""
    mat = np.asarray(mat, np.int64)
    cols = np.arange(WAVE) % TILE
    lane_elems = mat[..., _cd_rows(), cols[:, None]]  # (..., 32, 8)
    return _to_words(lane_elems, width)


def unpack_cd(words, width):
    """Inverse of :func:`pack_cd`: ``(..., 16, 16)``."""
    words = np.asarray(words, np.int64)
    lane_elems = _from_words(words, width, 8)
    cols = np.arange(WAVE) % TILE
    out = np.zeros(words.shape[:-2] + (TILE, TILE), np.int64)
    out[..., _cd_rows(), cols[:, None]] = lane_elems
    return out


def pack_index(idx, key=0, into=None):
    """Index VGPR words (``(..., 32)``) holding ``idx[..., 16, ks]`` (2-bit values).

    ``ks`` = 16 uses the half ``key`` of each lane's word (the other half is kept from ``into``,
    zero by default); ``ks`` = 32 uses the whole word (``key`` must be 0).
    """
    idx = np.asarray(idx, np.int64)
    ks = idx.shape[-1]
    lane = pack_rows(idx, 2)[..., 0, :]  # one "VGPR" of 2-bit elements: (..., 32)
    base = np.zeros(lane.shape, np.int64) if into is None else np.asarray(into, np.int64)
    if ks == 32:
        if key:
            raise ValueError("`index_key` must be 0 when 32 elements are stored per row")
        return lane
    if ks != 16:
        raise ValueError(f"stored depth must be 16 or 32, not {ks}")
    shift = 16 * key
    return (base & ~(0xFFFF << shift) & 0xFFFFFFFF) | ((lane & 0xFFFF) << shift)


def unpack_index(words, ks, key=0):
    """Inverse of :func:`pack_index`: ``(..., 16, ks)`` 2-bit indices (``key`` broadcasts)."""
    words = np.asarray(words, np.int64)
    if ks == 16:
        words = (words >> (16 * np.asarray(key, np.int64)[..., None])) & 0xFFFF
    return unpack_rows(words[..., None, :], 2, ks)


def compress(logical, keep):
    """``(stored, idx)`` of a 2:4-sparse matrix: ``logical[..., 16, K]`` patterns and a boolean
    ``keep`` of the same shape with exactly two ``True`` per group of four along K."""
    logical = np.asarray(logical, np.int64)
    keep = np.asarray(keep, bool)
    k = logical.shape[-1]
    groups = keep.reshape(keep.shape[:-1] + (k // 4, 4))
    if not (groups.sum(axis=-1) == 2).all():
        raise ValueError("`keep` must mark exactly two of every four elements")
    pos = np.argsort(~groups, axis=-1, kind="stable")[..., :2]  # the two kept, in order
    idx = pos.reshape(keep.shape[:-1] + (k // 2,))
    base = 4 * (np.arange(k // 2) // 2)
    stored = np.take_along_axis(logical, base + idx, axis=-1)
    return stored, idx


def expand(stored, idx):
    """Logical ``(..., 16, 2 ks)`` matrix with the stored values at their indices, zeros
    elsewhere. Each group's two indices must differ."""
    stored = np.asarray(stored, np.int64)
    idx = np.asarray(idx, np.int64)
    ks = stored.shape[-1]
    pairs = idx.reshape(idx.shape[:-1] + (ks // 2, 2))
    if (pairs[..., 0] == pairs[..., 1]).any():
        raise ValueError("the two indices of a group must differ")
    out = np.zeros(stored.shape[:-1] + (2 * ks,), np.int64)
    base = 4 * (np.arange(ks) // 2)
    np.put_along_axis(out, base + idx, stored, axis=-1)
    return out


def select_b(b, idx):
    """The B rows a sparse A selects: ``b[..., K, 16]`` and ``idx[..., 16, ks]`` give
    ``out[..., m, n, s] = b[..., 4 * (s // 2) + idx[m, s], n]`` (the index-driven row selection)."""
    b = np.asarray(b, np.int64)
    idx = np.asarray(idx, np.int64)
    ks = idx.shape[-1]
    rows = 4 * (np.arange(ks) // 2) + idx  # (..., 16, ks): logical K per (m, s)
    bt = np.swapaxes(b, -1, -2)  # (..., 16n, K)
    # out[..., m, n, s] = bt[..., n, rows[..., m, s]]
    return np.take_along_axis(bt[..., None, :, :], rows[..., :, None, :], axis=-1)
