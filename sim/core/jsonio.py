"""JSON Lines input and output of transactions and per-cycle events.

One JSON object per line, fields named as in the block's layout (nested objects for structures,
lists for arrays). FP32 fields accept a number or a bit pattern written as a string of 8 hex
digits (``"3f800000"`` or ``"0x3f800000"``); they are written out as ``"0x%08x"`` bit patterns so
nothing is lost. Infinities and NaN may be written as Python's JSON writes them (``Infinity``,
``-Infinity``, ``NaN``) or as strings (``"Infinity"``, ``"-inf"``, ``"NaN"``, any case); NaN
becomes the quiet NaN ``0x7fc00000`` (``"-NaN"``: ``0xffc00000``; a bit pattern gives any other). A number
beyond the binary32 range (``1e39``) is refused rather than rounded to infinity: write
``"7f800000"`` (or ``Infinity``) for that. Enumeration fields accept the member
name or its value and are written out as member names. Blank lines and lines
starting with ``#`` are skipped.
"""

import json
import sys
from pathlib import Path

from gpurtl.facts.fp32 import f32_bits

from . import layouts
from .files import write_atomic

__all__ = [
    "InputError",
    "parse_value",
    "read_json_objects",
    "read_text",
    "read_jsonl",
    "write_jsonl",
    "to_jsonable",
]


#: Names of the non-finite values an FP32 field accepts as a string (any case, ``+``/``-`` sign):
#: JSON has no literal for them, and ``"Infinity"`` is what JavaScript's ``String(1/0)`` gives.
NON_FINITE = ("infinity", "inf", "nan")


class InputError(Exception):
    """A user's input file is malformed; the message names the file, line and field."""


def _merge(defaults, given):
    if isinstance(defaults, dict) and isinstance(given, dict):
        merged = {
            key: _merge(defaults[key], given[key])
            if key in defaults and key in given
            else given.get(key, defaults.get(key))
            for key in {**defaults, **given}
        }
        return merged
    return given


def _check_list(shape, node, path, where):
    """A JSON list must stand where the layout has an array, with as many items as the array:
    the message gives the field's shape, outer index first, as ``gpurtl list`` writes it (a list
    written in the other order, 32 lists of 2 for ``u32[2][32]``, is caught here)."""
    field = layouts.layout_at(shape, path)
    if field is None:
        return  # an unknown field: the caller names it
    text = layouts.describe(field)
    length = layouts.array_length(field)
    if length is None:
        what = "an object" if text.startswith("{") else "a single value"
        raise InputError(f"{where}: field `{path}` must be {what} ({text}), not a list")
    if len(node) != length:
        raise InputError(
            f"{where}: field `{path}` must be a list of {length} (shape {text}, outer index "
            f"first), not a list of {len(node)}"
        )


def _convert(shape, value, path, where):
    """Replace FP32 numbers and hex strings by bit patterns; check unknown fields."""
    leaf_paths = {leaf.path: leaf for leaf in layouts.leaves(shape)}

    def walk(node, prefix):
        if isinstance(node, dict):
            result = {}
            for key, item in node.items():
                sub = f"{prefix}.{key}" if prefix else str(key)
                if sub not in leaf_paths and not any(
                    p.startswith(sub + ".") or p.startswith(sub + "[") for p in leaf_paths
                ):
                    raise InputError(f"{where}: unknown field `{sub}`")
                result[key] = walk(item, sub)
            return result
        if isinstance(node, list):
            _check_list(shape, node, prefix, where)
            return [walk(item, f"{prefix}[{index}]") for index, item in enumerate(node)]
        leaf = leaf_paths.get(prefix)
        if leaf is None:
            raise InputError(f"{where}: field `{prefix}` must be an object or list, not {node!r}")
        if leaf.kind == "f32":
            if isinstance(node, bool):
                raise InputError(
                    f"{where}: field `{prefix}` must be a number or 8 hex digits, not {node!r}"
                )
            if isinstance(node, str):
                if node.strip().lower().lstrip("+-") in NON_FINITE:
                    return f32_bits(float(node))
                text = node[2:] if node.lower().startswith("0x") else node
                if len(text) != 8 or any(c not in "0123456789abcdefABCDEF" for c in text):
                    raise InputError(
                        f"{where}: field `{prefix}` must be a number or 8 hex digits "
                        f'(or "Infinity", "-Infinity", "NaN"), not {node!r}'
                    )
                return int(text, 16)
            if isinstance(node, (int, float)):
                try:
                    return f32_bits(float(node))
                except OverflowError:  # finite, but rounds beyond the largest binary32
                    raise InputError(
                        f"{where}: field `{prefix}` must be within the FP32 range "
                        f'(magnitude at most 3.4028235e+38; write "7f800000" '
                        f"for infinity), not {node!r}"
                    ) from None
            raise InputError(
                f"{where}: field `{prefix}` must be a number or 8 hex digits, not {node!r}"
            )
        if isinstance(node, str) and leaf.kind != "enum":
            try:
                return int(node, 0)
            except ValueError:
                raise InputError(
                    f"{where}: field `{prefix}` must be an integer, not {node!r}"
                ) from None
        if isinstance(node, float):
            if not node.is_integer():
                raise InputError(f"{where}: field `{prefix}` must be an integer, not {node!r}")
            return int(node)
        return node

    return walk(value, path)


def parse_value(shape, obj, where, defaults=None):
    """One value of ``shape`` from a parsed JSON object (FP32 numbers and hex strings, enumeration
    names, missing fields from ``defaults``), normalised to plain integers; raises
    :class:`InputError` starting with ``where`` (``file:line``)."""
    obj = _convert(shape, obj, "", where)
    if defaults:
        obj = _merge(defaults, obj)
    try:
        bits = layouts.pack(shape, obj)
    except layouts.LayoutValueError as error:
        raise InputError(f"{where}: {error}") from None
    return layouts.unpack(shape, bits)


def read_text(path):
    """The text of the file ``path``, or of standard input when ``path`` is ``-``; raises
    :class:`InputError` for a file that cannot be read or is not UTF-8 text."""
    if str(path) == "-":
        try:
            return sys.stdin.read()
        except UnicodeDecodeError:
            raise InputError("<stdin>: not UTF-8 text") from None
    path = Path(path)
    try:
        return path.read_text()
    except OSError as error:
        raise InputError(f"{path}: cannot read: {error.strerror}") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not a UTF-8 text file") from None


def read_json_objects(path):
    """``(where, object)`` for each JSON line of a file, or of standard input when ``path`` is
    ``-`` (``where`` is ``file:line``, ``<stdin>:line``); blank lines and ``#`` comments are
    skipped. Raises :class:`InputError` for an unreadable file, a line that
    is not JSON or not an object."""
    text = read_text(path)
    path = "<stdin>" if str(path) == "-" else Path(path)
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        where = f"{path}:{number}"
        try:
            obj = json.loads(stripped)
        except json.JSONDecodeError as error:
            raise InputError(
                f"{where}: not valid JSON ({error.msg} at column {error.colno})"
            ) from None
        if not isinstance(obj, dict):
            raise InputError(f"{where}: each line must be a JSON object, not {type(obj).__name__}")
        yield where, obj


def read_jsonl(path, shape, defaults=None):
    """Parse a JSON Lines file of values of ``shape``; returns a list of dictionaries.

    Raises :class:`InputError` naming the file, line and field for anything malformed, missing,
    unknown or out of range.
    """
    values = [parse_value(shape, obj, where, defaults) for where, obj in read_json_objects(path)]
    if not values:
        name = "<stdin>" if str(path) == "-" else path
        raise InputError(f"{name}: no transactions (the input has no JSON lines)")
    return values


def _plain_int(node):
    if isinstance(node, bool):
        return int(node)
    if not isinstance(node, int) and hasattr(node, "value"):  # an enumeration member
        return int(node.value)
    return int(node)


def to_jsonable(shape, value):
    """Dictionary ready for ``json.dumps``: FP32 fields as ``"0x%08x"`` strings, enumeration
    fields as member names (values that name no member stay numbers)."""
    special = {leaf.path: leaf for leaf in layouts.leaves(shape) if leaf.kind in ("f32", "enum")}

    def walk(node, prefix):
        if isinstance(node, dict):
            return {k: walk(v, f"{prefix}.{k}" if prefix else str(k)) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v, f"{prefix}[{i}]") for i, v in enumerate(node)]
        leaf = special.get(prefix)
        if isinstance(node, str):  # already a member name
            return node
        number = _plain_int(node)
        if leaf is None:
            return number
        if leaf.kind == "f32":
            return f"0x{number:08x}"
        try:
            return leaf.enum(number).name
        except ValueError:
            return number

    return walk(value, "")


def write_jsonl(path, shape, values):
    """Write values as JSON Lines (see :func:`gpurtl.sim.core.files.write_atomic`)."""
    write_atomic(path, (json.dumps(to_jsonable(shape, value)) + "\n" for value in values))
