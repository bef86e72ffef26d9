"""``gpurtl encode``: ``ray_accel`` instructions from nodes and rays written by hand.

Each JSON line describes one instruction: a node in readable form, the ray, and optionally the
node's address, the pointer flags and descriptor fields. The node is encoded with the golden
model's own encoders (:mod:`gpurtl.golden.ray_accel.encode.box_node`, ``instance``, ``primitive_node``)
and the result is one ``ray_accel`` input line, as ``gpurtl run ray_accel --input`` reads::

    {"node": {"kind": "box8", "children": [
        {"min": [1, -1, -1], "max": [2, 1, 1], "type": "box"},
        {"min": [4, -1, -1], "max": [5, 1, 1], "type": "triangle", "range": 2}]},
     "ray": {"origin": [0, 0, 0], "dir": [1, 0, 0]}}

``node`` is one of

``{"kind": "box8", "children": [...], "internal_base": 0, "leaf_base": 0}``
    An RT IP 3.1 quantized BVH8 box node of 1 to 8 children. A child has ``min`` and ``max`` (3
    numbers each, rounded outwards by the encoder), ``type`` (``"box"``, ``"instance"``,
    ``"triangle"`` or a 4-bit node type), and optionally ``range`` (default 1), ``cull_flags``
    (default 0) and ``mask`` (default 255). The bases are byte addresses >> 3 (multiples of 16).
``{"kind": "instance", "world_to_object": [[4 numbers] x 3], "child_base": N, "filter": [...]}``
    An instance node: the 3x4 world-to-object matrix, the 64-bit BLAS base operand (VA >> 3 and
    the instance flags in bits 54-63), optionally ``user_data``, ``mask`` and ``filter``: 1 to 4
    boxes (as the children of ``box8``) around the instance's object-space geometry.
``{"kind": "triangles", "pairs": [{"tri0": T, "tri1": T}, ...], "pair": 0}``
    A compressed primitive node of 1 to 8 triangle pairs; ``T`` is ``{"vertices": [[x, y, z] x
    3]}`` with optional ``prim_id``, ``geo_id``, ``opaque`` (default 1) and ``double_sided``;
    ``tri1`` may be left out. ``pair`` picks the pair the instruction tests (default 0).

``address`` is the node's byte address (a multiple of 128, default 0); the node pointer is
``address >> 3`` plus the node type (``node_ptr`` gives it directly instead). ``ray``, ``desc``
and ``pointer_flags`` are the instruction's own fields (see ``gpurtl list ray_accel``; ``extent``
and ``instance_mask`` may be left out). A mistake names the file, line and field.
"""

from gpurtl.facts.ray_accel import INSTR_LAYOUT, NODE_DWORDS, NODE_TYPE_BOX8, NODE_TYPE_INSTANCE

from ..core.jsonio import InputError, parse_value, read_json_objects, to_jsonable

__all__ = ["CHILD_TYPES", "encode_line", "encode_file"]

#: Names of the child types of a box node (any 4-bit type may be given as a number).
CHILD_TYPES = {"box": NODE_TYPE_BOX8, "instance": NODE_TYPE_INSTANCE, "triangle": 0}

_LINE_KEYS = ("node", "ray", "address", "node_ptr", "pointer_flags", "desc")


class _Fields:
    """Typed access to the fields of one JSON object, errors naming ``where`` and the path."""

    def __init__(self, obj, where, path, known):
        if not isinstance(obj, dict):
            raise InputError(f"{where}: field `{path}` must be an object, not {obj!r}")
        self.obj, self.where, self.path = obj, where, path
        for key in obj:
            if key not in known:
                raise InputError(
                    f"{where}: unknown field `{self.name(key)}` (known: {', '.join(known)})"
                )

    def name(self, key):
        return f"{self.path}.{key}" if self.path else key

    def fail(self, key, expected):
        value = self.obj.get(key)
        raise InputError(
            f"{self.where}: field `{self.name(key)}` must be {expected}, not {value!r}"
        )

    def get(self, key, default=None, required=False):
        if key not in self.obj:
            if required:
                raise InputError(f"{self.where}: field `{self.name(key)}` is missing")
            return default
        return self.obj[key]

    def integer(self, key, default=None, bits=32, required=False):
        value = self.get(key, default, required)
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 1 << bits:
            self.fail(key, f"an integer from 0 to 2**{bits} - 1")
        return value

    def numbers(self, key, count):
        return _numbers(self.get(key, required=True), self.where, self.name(key), count)

    def objects(self, key, low, high):
        value = self.get(key, required=True)
        if not isinstance(value, list) or not low <= len(value) <= high:
            self.fail(key, f"a list of {low} to {high} objects")
        return value


def _numbers(value, where, path, count):
    """``value`` as ``count`` floats; raises :class:`InputError` naming ``path`` otherwise."""
    if (
        not isinstance(value, list)
        or len(value) != count
        or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
    ):
        raise InputError(
            f"{where}: field `{path}` must be a list of {count} numbers, not {value!r}"
        )
    return [float(v) for v in value]


def _encoded(where, path, encode):
    """``encode()``, with the encoder's ValueError as an :class:`InputError` naming ``path``."""
    try:
        return encode()
    except ValueError as error:
        raise InputError(f"{where}: field `{path}`: {error}") from None


def _boxes(fields, key, high):
    """The child dictionaries :func:`box_node.encode_box8` takes."""
    children = []
    for index, child in enumerate(fields.objects(key, 1, high)):
        c = _Fields(
            child,
            fields.where,
            f"{fields.name(key)}[{index}]",
            ("min", "max", "type", "range", "cull_flags", "mask"),
        )
        kind = c.get("type", "box")
        if isinstance(kind, str) and kind in CHILD_TYPES:
            kind = CHILD_TYPES[kind]
        elif isinstance(kind, bool) or not isinstance(kind, int) or not 0 <= kind < 16:
            c.fail("type", f"one of {', '.join(CHILD_TYPES)} or a node type from 0 to 15")
        children.append(
            {
                "min": c.numbers("min", 3),
                "max": c.numbers("max", 3),
                "type": kind,
                "range": c.integer("range", 1, bits=4),
                "cull_flags": c.integer("cull_flags", 0, bits=4),
                "mask": c.integer("mask", 0xFF, bits=8),
            }
        )
    return children


def _box8(node):
    from gpurtl.golden.ray_accel.encode import box_node

    children = _boxes(node, "children", 8)
    bases = {key: node.integer(key, 0) for key in ("internal_base", "leaf_base")}
    dwords = _encoded(
        node.where, node.name("children"), lambda: box_node.encode_box8(children, **bases)
    )
    return dwords, NODE_TYPE_BOX8


def _instance(node):
    from gpurtl.golden.ray_accel.encode import box_node
    from gpurtl.golden.ray_accel.scalar import instance

    matrix = node.get("world_to_object", required=True)
    if not isinstance(matrix, list) or len(matrix) != 3:
        node.fail("world_to_object", "3 rows of 4 numbers")
    rows = [
        _numbers(row, node.where, f"{node.name('world_to_object')}[{k}]", 4)
        for k, row in enumerate(matrix)
    ]
    child_base = node.integer("child_base", required=True, bits=64)
    boxes = _boxes(node, "filter", 4) if "filter" in node.obj else None
    filt = (
        _encoded(node.where, node.name("filter"), lambda: box_node.encode_box8(boxes))
        if boxes
        else None
    )
    dwords = _encoded(
        node.where,
        node.path,
        lambda: instance.encode_instance(
            rows,
            child_base,
            user_data=node.integer("user_data", 0, bits=24),
            mask=node.integer("mask", 0xFF, bits=8),
            **(
                {
                    "filter_origin": filt[3:6],
                    "filter_exp": [(filt[6] >> (8 * a)) & 0xFF for a in range(3)],
                    "filter_count": len(boxes),
                    "filter_info": [filt[8 + 3 * k : 11 + 3 * k] for k in range(len(boxes))],
                }
                if filt
                else {}
            ),
        ),
    )
    return dwords, NODE_TYPE_INSTANCE


def _triangle(fields, key):
    from gpurtl.golden.ray_accel.encode.primitive_node import Triangle

    t = _Fields(
        fields.get(key),
        fields.where,
        fields.name(key),
        ("vertices", "prim_id", "geo_id", "opaque", "double_sided"),
    )
    vertices = t.get("vertices", required=True)
    if not isinstance(vertices, list) or len(vertices) != 3:
        t.fail("vertices", "3 vertices of 3 numbers")
    return Triangle(
        vertices=tuple(
            tuple(_numbers(v, t.where, f"{t.name('vertices')}[{k}]", 3))
            for k, v in enumerate(vertices)
        ),
        prim_id=t.integer("prim_id", 0, bits=31),
        geo_id=t.integer("geo_id", 0, bits=30),
        opaque=t.integer("opaque", 1, bits=1),
        double_sided=t.integer("double_sided", 0, bits=1),
    )


def _triangles(node):
    from gpurtl.golden.ray_accel.encode.primitive_node import TrianglePair, encode_primitive_node
    from gpurtl.golden.ray_accel.encode.ray import node_dwords

    pairs = []
    for index, pair in enumerate(node.objects("pairs", 1, 8)):
        p = _Fields(pair, node.where, f"{node.name('pairs')}[{index}]", ("tri0", "tri1"))
        tri1 = _triangle(p, "tri1") if p.get("tri1") is not None else None
        pairs.append(TrianglePair(_triangle(p, "tri0"), tri1))
    raw = _encoded(node.where, node.name("pairs"), lambda: encode_primitive_node(pairs))
    pick = node.integer("pair", 0, bits=3)
    if pick >= len(pairs):
        node.fail("pair", f"the index of one of the node's {len(pairs)} pairs")
    return node_dwords(raw), (pick & 3) | ((pick & 4) << 1)


_KINDS = {
    "box8": (_box8, ("kind", "children", "internal_base", "leaf_base")),
    "instance": (
        _instance,
        ("kind", "world_to_object", "child_base", "user_data", "mask", "filter"),
    ),
    "triangles": (_triangles, ("kind", "pairs", "pair")),
}


def encode_line(obj, where):
    """The ``ray_accel`` input value (a dictionary of plain integers) of one description."""
    line = _Fields(obj, where, "", _LINE_KEYS)
    described = line.get("node", required=True)
    kind = described.get("kind") if isinstance(described, dict) else None
    if kind not in _KINDS:
        raise InputError(
            f"{where}: field `node.kind` must be one of {', '.join(_KINDS)}, not {kind!r}"
        )
    encode, known = _KINDS[kind]
    dwords, node_type = encode(_Fields(described, where, "node", known))
    assert len(dwords) == NODE_DWORDS
    if "node_ptr" in obj:
        node_ptr = line.integer("node_ptr")
    else:
        address = line.integer("address", 0, bits=35)
        if address % 128:
            line.fail("address", "a multiple of 128 (a node's byte address)")
        node_ptr = (address >> 3) | node_type
    from ..core.registry import get

    block = get("ray_accel")
    instruction = {
        "dual": 0,
        "node_ptr": [node_ptr, 0],
        "node": [list(dwords), [0] * NODE_DWORDS],
        "ray": line.get("ray", required=True),
    }
    for key in ("pointer_flags", "desc"):
        if key in obj:
            instruction[key] = obj[key]
    defaults = block.input_defaults(block.resolve())
    return parse_value(INSTR_LAYOUT, instruction, where, defaults)


def encode_file(path):
    """JSON-able ``ray_accel`` input lines of every description in the JSON Lines file ``path``."""
    values = [
        to_jsonable(INSTR_LAYOUT, encode_line(obj, where)) for where, obj in read_json_objects(path)
    ]
    if not values:
        name = "<stdin>" if str(path) == "-" else path
        raise InputError(f"{name}: no descriptions (the input has no JSON lines)")
    return values
