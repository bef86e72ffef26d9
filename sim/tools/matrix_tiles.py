"""``gpurtl encode matrix`` / ``gpurtl decode matrix``: WMMA / SWMMAC tiles as matrices of numbers
and as the VGPR lanes of a ``matrix_core`` transaction.

``encode`` reads one JSON object a line, the matrices of one instruction of the build's
``family``::

    {"op": 0, "a": [[16 numbers] x 16], "b": [[16 numbers] x K], "c": [[16 numbers] x 16]}

* ``op``: the instruction, by index in the family or by name (``"v_wmma_f32_16x16x16_f16"``;
  ``gpurtl list matrix_core`` lists them);
* ``a``: 16 rows of K (the instruction's logical depth); for an SWMMAC instruction the logical A,
  with at most two non-zero values in every group of four along K (the encoder stores those two
  and writes their positions into the index VGPR);
* ``b``: K rows of 16; ``c``: 16 rows of 16;
* floating-point elements are numbers (or ``"NaN"``, ``"Infinity"``, ``"-Infinity"``), rounded to
  the element format to nearest even; integer elements are integers in the element's range
  (signed when ``a_signed`` / ``b_signed`` is 1, the default), C an int32;
* optional: ``index_key``, ``neg_lo``, ``neg_hi`` (float families), ``a_signed``, ``b_signed``,
  ``clamp`` (integer families), as the block's input fields.

Each line becomes one ``matrix_core`` input line (``gpurtl run matrix_core --input``): the
register words of A, B, C and the index, VGPR by VGPR, 32 lanes each, laid out as AMD's Matrix
Instruction Calculator gives them for RDNA 4 (:mod:`gpurtl.golden.matrix.layouts`); VGPRs the
instruction does not read are 0.

``decode`` reads the lines ``gpurtl run matrix_core`` writes (``{"d": ...}``) and gives D as 16
rows of 16 numbers; given an input line (with ``a``) it gives the instruction's name and its A
(logical, for SWMMAC), B and C as matrices, so that ``decode(encode(x))`` is ``x`` with the
numbers rounded to their formats.
"""

import math

import numpy as np

from gpurtl.facts.matrix import FORMATS, PRESETS, TILE, family_variants, operand_chunk
from gpurtl.golden.matrix import layouts as ml
from gpurtl.golden.matrix.formats import int_value, to_float
from gpurtl.golden.matrix.layouts import compress
from gpurtl.golden.matrix.samples import encode as encode_values

from ..core.jsonio import InputError

__all__ = ["decode_line", "encode_line", "element_format"]

_INPUT_KEYS = (
    "op",
    "a",
    "b",
    "c",
    "index_key",
    "neg_lo",
    "neg_hi",
    "a_signed",
    "b_signed",
    "clamp",
)


def element_format(name, preset):
    """The element format of format name ``name`` under the arithmetic ``preset`` (FP8 and BF8
    are the FNUZ kinds under ``cdna3``)."""
    if name in ("fp8", "bf8"):
        return PRESETS[preset].algorithm(name).element_format(name)
    return FORMATS[name]


def _variant(family, op, where):
    variants = family_variants(family)
    names = [v.name for v in variants]
    if isinstance(op, str) and op.lower() in names:
        return names.index(op.lower()), variants[names.index(op.lower())]
    if isinstance(op, int) and not isinstance(op, bool) and 0 <= op < len(variants):
        return op, variants[op]
    listed = ", ".join(f"{i} {n}" for i, n in enumerate(names))
    raise InputError(f"{where}: field `op` must be one of {listed} (family {family}), not {op!r}")


def _matrix(obj, key, rows, cols, where):
    value = obj.get(key)
    if value is None:
        raise InputError(f"{where}: field `{key}` is missing (a list of {rows} rows of {cols})")
    if (
        not isinstance(value, list)
        or len(value) != rows
        or not all(isinstance(row, list) and len(row) == cols for row in value)
    ):
        got = (
            f"a list of {len(value)}"
            + (
                f" rows of {sorted({len(r) for r in value if isinstance(r, list)})}"
                if all(isinstance(r, list) for r in value)
                else ""
            )
            if isinstance(value, list)
            else type(value).__name__
        )
        raise InputError(f"{where}: field `{key}` must be {rows} rows of {cols} numbers, not {got}")
    return value


def _float(value, where, path):
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise InputError(f"{where}: field `{path}` must be a number, not {value!r}")
    if isinstance(value, str):
        if value.strip().lower().lstrip("+-") not in ("nan", "inf", "infinity"):
            raise InputError(
                f'{where}: field `{path}` must be a number (or "NaN", "Infinity"), not {value!r}'
            )
        return float(value)
    return float(value)


def _bits(matrix, name, preset, where, key, signed=True):
    """Element patterns of a matrix of numbers in the format ``name``."""
    f = element_format(name, preset)
    if f.is_float:
        values = [
            [_float(x, where, f"{key}[{r}][{c}]") for c, x in enumerate(row)]
            for r, row in enumerate(matrix)
        ]
        if not f.name.startswith(("f16", "bf16", "f32")) and any(
            math.isinf(x) for row in values for x in row
        ):
            raise InputError(f"{where}: field `{key}`: {f.name} has no infinity")
        return np.asarray(encode_values(values, f), np.int64)
    lo, hi = (-(1 << (f.bits - 1)), (1 << (f.bits - 1)) - 1) if signed else (0, (1 << f.bits) - 1)
    out = np.zeros((len(matrix), len(matrix[0])), np.int64)
    for r, row in enumerate(matrix):
        for c, x in enumerate(row):
            if isinstance(x, bool) or not isinstance(x, int) or not lo <= x <= hi:
                kind = "signed" if signed else "unsigned"
                raise InputError(
                    f"{where}: field `{key}[{r}][{c}]` must be an integer in {lo}..{hi} "
                    f"({kind} {f.bits}-bit), not {x!r}"
                )
            out[r, c] = x & ((1 << f.bits) - 1)
    return out


def _flag(obj, key, top, default, where):
    value = obj.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= top:
        raise InputError(f"{where}: field `{key}` must be an integer in 0..{top}, not {value!r}")
    return value


def encode_line(obj, where, *, family="f16_f32", preset="rdna4"):
    """The ``matrix_core`` input dictionary of one line of matrices (module doc string)."""
    for key in obj:
        if key not in _INPUT_KEYS:
            raise InputError(f"{where}: unknown field `{key}` (known: {', '.join(_INPUT_KEYS)})")
    if "op" not in obj:
        raise InputError(f"{where}: field `op` is missing (the instruction, index or name)")
    op, v = _variant(family, obj["op"], where)
    variants = family_variants(family)
    sizes = {
        "a": max(x.a_vgprs for x in variants),
        "b": max(x.b_vgprs for x in variants),
        "c": max(x.cd_vgprs for x in variants),
    }
    tx = {"op": op}
    if v.is_int:
        tx["a_signed"] = _flag(obj, "a_signed", 1, 1, where)
        tx["b_signed"] = _flag(obj, "b_signed", 1, 1, where)
        tx["clamp"] = _flag(obj, "clamp", 1, 0, where)
    else:
        for key in ("a_signed", "b_signed", "clamp"):
            if key in obj:
                raise InputError(f"{where}: field `{key}` is for integer families, not {family}")
        tx["neg_lo"] = _flag(obj, "neg_lo", 7, 0, where)
        tx["neg_hi"] = _flag(obj, "neg_hi", 7, 0, where)
    key = _flag(obj, "index_key", 1, 0, where)
    if key and v.index_keys < 2:
        raise InputError(f"{where}: field `index_key` must be 0 for {v.name}, not {key}")
    tx["index_key"] = key
    a = _bits(_matrix(obj, "a", TILE, v.k, where), v.a, preset, where, "a", tx.get("a_signed", 1))
    b = _bits(_matrix(obj, "b", v.k, TILE, where), v.b, preset, where, "b", tx.get("b_signed", 1))
    c = _bits(_matrix(obj, "c", TILE, TILE, where), v.cd, preset, where, "c")
    idx_word = np.zeros(32, np.int64)
    if v.sparse:
        nonzero = a != 0
        groups = nonzero.reshape(TILE, v.k // 4, 4)
        crowded = np.argwhere(groups.sum(axis=-1) > 2)
        if len(crowded):
            row, group = crowded[0]
            raise InputError(
                f"{where}: field `a[{row}]`: {v.name} is 2:4 sparse: at most two non-zero values "
                f"in each group of four, not {int(groups[row, group].sum())} in "
                f"a[{row}][{4 * group}..{4 * group + 3}]"
            )
        # keep the non-zeros and fill each group up to two with its first zeros
        keep = np.zeros_like(groups)
        for r in range(TILE):
            for g in range(v.k // 4):
                chosen = list(np.flatnonzero(groups[r, g]))
                chosen += [i for i in range(4) if i not in chosen][: 2 - len(chosen)]
                keep[r, g, chosen] = True
        a, idx = compress(a, keep.reshape(TILE, v.k))
        idx_word = ml.pack_index(idx, key if v.index_keys > 1 else 0, chunk=operand_chunk(v, "a"))

    def words(packed, total):
        packed = np.asarray(packed, np.int64)
        extra = np.zeros((total - packed.shape[0], 32), np.int64)
        return np.concatenate([packed, extra]).tolist()

    tx["a"] = words(ml.pack_a(v, a), sizes["a"])
    tx["b"] = words(ml.pack_b(v, b), sizes["b"])
    tx["c"] = words(ml.pack_cd(c, FORMATS[v.cd].bits), sizes["c"])
    tx["idx"] = np.asarray(idx_word).tolist()
    return tx


def _numbers(bits, name, preset, signed=True):
    f = element_format(name, preset)
    if f.is_float:
        values = to_float(np.asarray(bits), f)
        return [[_json_float(x) for x in row] for row in np.asarray(values).tolist()]
    return np.asarray(int_value(bits, f.bits, signed)).tolist()


def _json_float(x):
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    return x


def _words(obj, key, vgprs, where):
    value = obj.get(key)
    if (
        not isinstance(value, list)
        or len(value) < vgprs
        or not all(isinstance(w, list) and len(w) == 32 for w in value)
    ):
        raise InputError(
            f"{where}: field `{key}` must be a list of {vgprs} VGPRs of 32 lane words "
            f"(as `gpurtl run matrix_core` writes it)"
        )
    try:
        return np.asarray(value, np.int64) & 0xFFFFFFFF
    except (TypeError, ValueError):
        raise InputError(f"{where}: field `{key}` must hold integers (lane words)") from None


def decode_line(obj, where, *, family="f16_f32", preset="rdna4"):
    """D as a matrix of one ``matrix_core`` output line, or the instruction and its A, B and C as
    matrices of one input line (module doc string)."""
    variants = family_variants(family)
    if "d" in obj:
        cd = variants[0].cd  # one accumulator format per family
        words = _words(obj, "d", variants[0].cd_vgprs, where)
        return {"d": _numbers(ml.unpack_cd(words, FORMATS[cd].bits), cd, preset)}
    if "a" not in obj:
        raise InputError(f"{where}: a line must have `d` (an output) or `a` (an input)")
    op, v = _variant(family, obj.get("op", 0), where)
    a_signed, b_signed = obj.get("a_signed", 1), obj.get("b_signed", 1)
    a = ml.unpack_a(v, _words(obj, "a", v.a_vgprs, where))
    out = {"op": v.name}
    if v.sparse:
        idx_words = np.asarray(obj.get("idx", [0] * 32), np.int64) & 0xFFFFFFFF
        key = obj.get("index_key", 0) if v.index_keys > 1 else 0
        idx = ml.unpack_index(idx_words, v.k_stored, key, chunk=operand_chunk(v, "a"))
        try:
            a = ml.expand(a, idx)
        except ValueError:
            # Two stored values at one position of a group have no logical matrix: the stored
            # A and its index, as the instruction reads them.
            out["a_stored"] = _numbers(a, v.a, preset, a_signed)
            out["a_index"] = np.asarray(idx).tolist()
            a = None
    if a is not None:
        out["a"] = _numbers(a, v.a, preset, a_signed)
    b = ml.unpack_b(v, _words(obj, "b", v.b_vgprs, where))
    c = ml.unpack_cd(_words(obj, "c", v.cd_vgprs, where), FORMATS[v.cd].bits)
    return out | {"b": _numbers(b, v.b, preset, b_signed), "c": _numbers(c, v.cd, preset)}
