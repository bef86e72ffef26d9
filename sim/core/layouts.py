"""Plain-Python views of Amaranth data layouts.

The RTL, the golden models and both simulator backends exchange values as Python dictionaries
whose keys are the field names of a :class:`amaranth.lib.data.Layout` (nested dictionaries for
nested structures, lists for arrays). This module converts between those dictionaries and the flat
bit patterns that travel over a port, and lists the leaf fields of a layout.
"""

import operator

from amaranth.hdl import Shape, ShapeCastable
from amaranth.lib import data, enum

from gpurtl.facts.fp32 import Float32, bits_f32, f32_bits

__all__ = [
    "Leaf",
    "leaves",
    "pack",
    "unpack",
    "zero",
    "diff",
    "describe",
    "array_length",
    "layout_at",
    "structure",
    "field_paths",
    "LayoutValueError",
]


class LayoutValueError(ValueError):
    """A value does not fit the layout; ``path`` names the field."""

    def __init__(self, path, message):
        self.path = path
        super().__init__(f"field `{path}`: {message}" if path else message)


class Leaf:
    """One scalar field of a layout: dotted ``path``, bit ``offset``, ``width`` and ``kind``.

    ``kind`` is ``"f32"`` for :class:`Float32` fields, ``"enum"`` for enumerations, ``"signed"`` or
    ``"unsigned"`` otherwise.
    """

    __slots__ = ("path", "offset", "width", "kind", "enum")

    def __init__(self, path, offset, width, kind, enum_cls=None):
        self.path, self.offset, self.width, self.kind, self.enum = (
            path,
            offset,
            width,
            kind,
            enum_cls,
        )

    def __repr__(self):
        return f"Leaf({self.path!r}, offset={self.offset}, width={self.width}, kind={self.kind!r})"


def _as_layout(shape):
    if isinstance(shape, data.Layout):
        return shape
    if isinstance(shape, ShapeCastable) and not (
        shape is Float32 or isinstance(shape, enum.EnumType)
    ):
        try:
            return data.Layout.cast(shape)
        except TypeError:
            return None
    return None


def _walk(shape, path, offset, out):
    layout = _as_layout(shape)
    if isinstance(layout, data.ArrayLayout):
        elem_width = Shape.cast(layout.elem_shape).width
        for index in range(layout.length):
            _walk(layout.elem_shape, f"{path}[{index}]", offset + index * elem_width, out)
    elif isinstance(layout, data.Layout):
        for name, field in layout:
            _walk(field.shape, f"{path}.{name}" if path else str(name), offset + field.offset, out)
    elif shape is Float32:
        out.append(Leaf(path, offset, 32, "f32"))
    elif isinstance(shape, enum.EnumType):
        out.append(Leaf(path, offset, Shape.cast(shape).width, "enum", shape))
    else:
        cast = Shape.cast(shape)
        out.append(Leaf(path, offset, cast.width, "signed" if cast.signed else "unsigned"))
    return out


_leaf_cache = {}


def leaves(shape):
    """Every scalar field of ``shape`` in layout order, as a list of :class:`Leaf`."""
    key = id(shape)
    cached = _leaf_cache.get(key)
    if cached is not None and cached[0] is shape:
        return cached[1]
    result = _walk(shape, "", 0, [])
    _leaf_cache[key] = (shape, result)
    return result


def _split(path):
    parts = []
    for part in path.split("."):
        while "[" in part:
            head, rest = part.split("[", 1)
            if head:
                parts.append(head)
            index, part = rest.split("]", 1)
            parts.append(int(index))
        if part:
            parts.append(part)
    return parts


def _lookup(value, parts):
    for part in parts:
        value = value[part]
    return value


def _store(tree, parts, value):
    for part, following in zip(parts, parts[1:]):
        if isinstance(part, int):
            while len(tree) <= part:
                tree.append(None)
            if tree[part] is None:
                tree[part] = [] if isinstance(following, int) else {}
            tree = tree[part]
        else:
            tree = tree.setdefault(part, [] if isinstance(following, int) else {})
    last = parts[-1]
    if isinstance(last, int):
        while len(tree) <= last:
            tree.append(None)
    tree[last] = value


def _field_int(leaf, value):
    """Bits of one leaf value (ints, bools, enum members; floats for Float32)."""
    if leaf.kind == "f32" and isinstance(value, float):
        return f32_bits(value)
    if leaf.kind == "enum" and not isinstance(value, int):
        if isinstance(value, str):
            try:
                value = leaf.enum[value]
            except KeyError:
                names = ", ".join(member.name for member in leaf.enum)
                raise LayoutValueError(
                    leaf.path, f"must be one of {names}, not {value!r}"
                ) from None
        value = value.value
    if isinstance(value, bool):
        value = int(value)
    if hasattr(value, "__index__"):
        value = int(value)
    else:
        raise LayoutValueError(leaf.path, f"must be an integer, not {value!r}")
    if leaf.kind == "signed":
        lo, hi = -(1 << (leaf.width - 1)), (1 << (leaf.width - 1)) - 1
    else:
        lo, hi = 0, (1 << leaf.width) - 1
    if not lo <= value <= hi:
        raise LayoutValueError(leaf.path, f"must be in {lo}..{hi} ({leaf.width} bits), not {value}")
    return value & ((1 << leaf.width) - 1)


def _tree(leaves_):
    """The nested structure of a layout's leaves: ``{key: subtree or leaf}``, lists as dicts
    keyed by index (``None``: a layout that is a single leaf)."""
    tree = {}
    for leaf in leaves_:
        if not leaf.path:
            return None
        node, parts = tree, _split(leaf.path)
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = leaf
    return tree


def _literal(node):
    """Python source of the value :func:`unpack` builds for a subtree, reading bits ``b``."""
    if isinstance(node, Leaf):
        field = f"(b >> {node.offset}) & {(1 << node.width) - 1}"
        if node.kind == "signed":
            return f"_sign({field}, {node.width})"
        return f"({field})"
    items = [_literal(child) for child in node.values()]
    if all(isinstance(key, int) for key in node):
        return "[" + ", ".join(items) + "]"
    return "{" + ", ".join(f"{key!r}: {item}" for key, item in zip(node, items)) + "}"


def _sign(field, width):
    return field - (1 << width) if field >> (width - 1) else field


def _compiled(shape):
    """``(pack, unpack)`` functions generated for ``shape`` (cached with its leaves): the same
    results as the general loops below in a fraction of the time; a value the fast ``pack``
    cannot take (a missing field, a float, an enum member, a value out of range) goes to the
    general loop, which names the field."""
    key = id(shape)
    cached = _compiled_cache.get(key)
    if cached is not None and cached[0] is shape:
        return cached[1]
    leaves_ = leaves(shape)
    tree = _tree(leaves_)
    lines = ["def fast_pack(v):", "    bits = bad = 0"]
    for leaf in leaves_:
        access = "".join(f"[{part!r}]" for part in _split(leaf.path)) if tree else ""
        # index(): ints, bools, numpy integers and IntEnum members; a float, a name or an
        # Enum member raises TypeError
        lines.append(f"    x = index(v{access})")
        if leaf.kind == "signed":
            lines.append(f"    bad |= (x + {1 << (leaf.width - 1)}) >> {leaf.width}")
            lines.append(f"    bits |= (x & {(1 << leaf.width) - 1}) << {leaf.offset}")
        else:
            lines.append(f"    bad |= x >> {leaf.width}")
            lines.append(f"    bits |= x << {leaf.offset}")
    lines += ["    if bad: raise TypeError", "    return bits"]
    lines.append(f"def fast_unpack(b): return {_literal(tree) if tree else _literal(leaves_[0])}")
    namespace = {"_sign": _sign, "index": operator.index}
    exec("\n".join(lines), namespace)  # noqa: S102 - source built from the layout's own leaves
    functions = (namespace["fast_pack"], namespace["fast_unpack"])
    _compiled_cache[key] = (shape, functions)
    return functions


_compiled_cache = {}


def pack(shape, value):
    """Flat bit pattern (``int``) of a dictionary ``value`` laid out as ``shape``.

    Raises :class:`LayoutValueError` naming the field when a value is missing or out of range.
    """
    try:
        return _compiled(shape)[0](value)
    except (KeyError, IndexError, TypeError, AttributeError):
        pass
    bits = 0
    for leaf in leaves(shape):
        try:
            field = _lookup(value, _split(leaf.path)) if leaf.path else value
        except (KeyError, IndexError, TypeError):
            raise LayoutValueError(leaf.path, "is missing") from None
        bits |= _field_int(leaf, field) << leaf.offset
    return bits


def unpack(shape, bits):
    """Dictionary of a flat bit pattern laid out as ``shape`` (signed fields sign-extended)."""
    return _compiled(shape)[1](bits)


def _unpack(shape, bits):
    """:func:`unpack` by the general loop (the reference of the generated one)."""
    tree = {}
    result = None
    for leaf in leaves(shape):
        field = (bits >> leaf.offset) & ((1 << leaf.width) - 1)
        if leaf.kind == "signed" and field >> (leaf.width - 1):
            field -= 1 << leaf.width
        if not leaf.path:
            result = field
        else:
            _store(tree, _split(leaf.path), field)
    return tree if result is None else result


def zero(shape):
    """Dictionary of an all-zero value of ``shape``."""
    return unpack(shape, 0)


def diff(shape, expected_bits, got_bits):
    """The first leaf whose bits differ, as ``(leaf, expected, got)``, or ``None``."""
    if expected_bits == got_bits:
        return None
    for leaf in leaves(shape):
        mask = (1 << leaf.width) - 1
        e, g = (expected_bits >> leaf.offset) & mask, (got_bits >> leaf.offset) & mask
        if e != g:
            return leaf, e, g
    return None


def format_leaf_value(leaf, bits):
    """Human-readable text of one leaf's bits."""
    if leaf.kind == "f32":
        return f"0x{bits:08x} ({bits_f32(bits)!r})"
    if leaf.kind == "enum":
        try:
            return f"{leaf.enum(bits).name} ({bits})"
        except ValueError:
            return str(bits)
    return f"{bits} (0x{bits:x})" if bits > 9 else str(bits)


def describe(shape):
    """One-line summary of the top-level fields of a layout, e.g. ``a:u8 b:{x:f32 y:u1}``.

    Array dimensions are written in the order JSON indexes them, the outer one first: an array
    of 2 arrays of 32 ``u32`` is ``u32[2][32]``, whose JSON value is 2 lists of 32 numbers and
    whose element ``[1][31]`` is the last one."""
    layout = _as_layout(shape)
    if isinstance(layout, data.ArrayLayout):
        dims = []
        while isinstance(layout, data.ArrayLayout):
            dims.append(layout.length)
            shape = layout.elem_shape
            layout = _as_layout(shape)
        return describe(shape) + "".join(f"[{n}]" for n in dims)
    if isinstance(layout, data.Layout):
        return "{" + " ".join(f"{name}:{describe(field.shape)}" for name, field in layout) + "}"
    if shape is Float32:
        return "f32"
    if isinstance(shape, enum.EnumType):
        return shape.__name__
    cast = Shape.cast(shape)
    return f"{'s' if cast.signed else 'u'}{cast.width}"


def layout_at(shape, path):
    """The shape of the field at ``path`` (``"a"``, ``"a[1]"``, ``"ray.origin"``) inside
    ``shape``, or ``None`` when there is no such field."""
    for part in _split(path) if path else []:
        layout = _as_layout(shape)
        if isinstance(part, int):
            if not isinstance(layout, data.ArrayLayout) or not 0 <= part < layout.length:
                return None
            shape = layout.elem_shape
        else:
            if not isinstance(layout, data.StructLayout | data.UnionLayout):
                return None
            try:
                shape = layout[part].shape
            except KeyError:
                return None
    return shape


def array_length(shape):
    """The number of items of an array shape (a JSON list), or ``None`` for any other shape."""
    layout = _as_layout(shape)
    return layout.length if isinstance(layout, data.ArrayLayout) else None


def structure(shape):
    """JSON-ready nested description of a layout: a dictionary per structure, ``{"array": elem,
    "length": n}`` per array, ``"u8"``/``"s16"``/``"f32"`` per scalar and ``{"enum": name,
    "width": w, "members": {name: value}}`` per enumeration."""
    layout = _as_layout(shape)
    if isinstance(layout, data.ArrayLayout):
        return {"array": structure(layout.elem_shape), "length": layout.length}
    if isinstance(layout, data.Layout):
        return {str(name): structure(field.shape) for name, field in layout}
    if shape is Float32:
        return "f32"
    if isinstance(shape, enum.EnumType):
        return {
            "enum": shape.__name__,
            "width": Shape.cast(shape).width,
            "members": {member.name: member.value for member in shape},
        }
    cast = Shape.cast(shape)
    return f"{'s' if cast.signed else 'u'}{cast.width}"


def field_paths(value, prefix=""):
    """Dotted paths of the scalar entries of a nested dictionary/list ``value``."""
    if isinstance(value, dict):
        return [
            path
            for key, item in value.items()
            for path in field_paths(item, f"{prefix}.{key}" if prefix else str(key))
        ]
    if isinstance(value, list):
        return [
            path
            for index, item in enumerate(value)
            for path in field_paths(item, f"{prefix}[{index}]")
        ]
    return [prefix]
