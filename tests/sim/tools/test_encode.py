"""`gpurtl encode`: ``ray_accel`` instructions from nodes and rays written by hand (boxes as
floats, triangles as vertices, instances with a matrix), run through the RTL and checked against
exact arithmetic and the golden model; a bad description is one line naming file, line and
field."""

import json
from fractions import Fraction

import pytest

from gpurtl.sim.core import registry
from gpurtl.sim.tools.cli import main

from .test_cli_usage import one_line_error


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


#: A BVH8 node of four boxes along the x axis (one off the ray) and a ray that passes through
#: three of them, written by hand.
NODE = {
    "kind": "box8",
    "internal_base": 0x100,
    "children": [
        {"min": [6, -1, -1], "max": [7, 1, 1], "type": "box"},
        {"min": [2, -1, -1], "max": [3, 1, 1], "type": "box"},
        {"min": [2, 8, 8], "max": [3, 9, 9], "type": "box"},
        {"min": [4, -2, -2], "max": [5, 2, 2], "type": "box"},
    ],
}
RAY = {"origin": [0.5, 0.25, -0.125], "dir": [1, 0.0625, 0.03125]}


def _slab_entry(child, origin, direction):
    """Exact ray/box slab test in rationals: the entry ``t`` of a hit, or ``None``."""
    near, far = Fraction(0), None
    for lo, hi, o, d in zip(child["min"], child["max"], origin, direction):
        t1, t2 = (
            (Fraction(lo) - Fraction(o)) / Fraction(d),
            (Fraction(hi) - Fraction(o)) / Fraction(d),
        )
        near, far = (
            max(near, min(t1, t2)),
            min(far if far is not None else max(t1, t2), max(t1, t2)),
        )
    return near if near <= far else None


def test_9_encode_a_hand_written_node_and_run_it(tmp_path, capsys):
    source, encoded = tmp_path / "mine.jsonl", tmp_path / "instr.jsonl"
    source.write_text(json.dumps({"node": NODE, "ray": RAY, "address": 0x80}) + "\n")
    code, _, err = run(capsys, "encode", "--input", source, "-o", encoded)
    assert code == 0, err
    small = [f"-p{p}" for p in ("engines=1", "boxes_per_engine=1", "triangles=0", "transforms=0")]
    code, out, err = run(capsys, "run", "ray_accel", *small, "--input", encoded)
    assert code == 0 and "1 passed, 0 failed" in err, err
    result = json.loads(out)
    # Box children get pointers in node order: internal_base + 16 per box child, type 5.
    pointers = [(NODE["internal_base"] + 16 * k) | 5 for k in range(len(NODE["children"]))]
    entries = [_slab_entry(c, RAY["origin"], RAY["dir"]) for c in NODE["children"]]
    hits = sorted((t, pointers[k]) for k, t in enumerate(entries) if t is not None)
    assert [p for _, p in hits] == [pointers[1], pointers[3], pointers[0]]  # near to far
    assert result["dw"][:8] == [p for _, p in hits] + [0xFFFFFFFF] * (8 - len(hits))
    instruction = json.loads(encoded.read_text())
    assert instruction["node_ptr"] == [(0x80 >> 3) | 5, 0]
    assert instruction["ray"]["extent"] == "0x7f800000"  # left out: unbounded


@pytest.mark.parametrize(
    "line, message",
    [
        (
            {"node": {"kind": "box8", "children": [{"min": [1, 2], "max": [2, 3, 4]}]}, "ray": RAY},
            "mine.jsonl:2: field `node.children[0].min` must be a list of 3 numbers, not [1, 2]",
        ),
        (
            {"node": {"kind": "box9"}, "ray": RAY},
            "mine.jsonl:2: field `node.kind` must be one of box8, instance, triangles, not 'box9'",
        ),
        ({"node": NODE, "ray": {"origin": [0, 0, 0]}}, "mine.jsonl:2: field `ray.dir"),
        (
            {"node": NODE, "ray": RAY, "address": 100},
            "mine.jsonl:2: field `address` must be a multiple of 128",
        ),
        (
            {
                "node": {"kind": "triangles", "pairs": [{"tri0": {"vertices": [[0, 0, 0]] * 2}}]},
                "ray": RAY,
            },
            "mine.jsonl:2: field `node.pairs[0].tri0.vertices` must be 3 vertices",
        ),
        ({"node": NODE, "ray": RAY, "colour": 1}, "mine.jsonl:2: unknown field `colour`"),
    ],
)
def test_9_bad_description_is_one_line_with_file_line_field(tmp_path, capsys, line, message):
    source = tmp_path / "mine.jsonl"
    source.write_text("# one good line, then the bad one\n" + json.dumps(line) + "\n")
    code, _, err = run(capsys, "encode", "--input", source, "-o", tmp_path / "out.jsonl")
    one_line_error(code, err, message)
    assert not (tmp_path / "out.jsonl").exists()


def test_9_encode_triangles_and_instances_agree_with_the_golden_model(tmp_path, capsys):
    from gpurtl.golden.ray_accel.scalar.intersect import intersect
    from gpurtl.sim.core.jsonio import read_jsonl

    lines = [
        {
            "node": {
                "kind": "triangles",
                "pairs": [
                    {"tri0": {"vertices": [[2, -1, -1], [2, 1, -1], [2, 0, 1]], "prim_id": 7}}
                ],
            },
            "ray": {"origin": [0, 0, 0], "dir": [1, 0, 0]},
        },
        {
            "node": {
                "kind": "instance",
                "world_to_object": [[1, 0, 0, -1], [0, 1, 0, 0], [0, 0, 1, 0]],
                "child_base": 0x1000,
                "filter": [{"min": [0, -1, -1], "max": [3, 1, 1]}],
            },
            "ray": {"origin": [0, 0, 0], "dir": [1, 0, 0]},
        },
    ]
    source, encoded = tmp_path / "mine.jsonl", tmp_path / "instr.jsonl"
    source.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert run(capsys, "encode", "--input", source, "-o", encoded)[0] == 0
    block = registry.get("ray_accel")
    in_layout, _ = block.layouts(**block.resolve())
    triangle, instance = read_jsonl(encoded, in_layout)
    # the triangle at x = 2 is hit at t = 2 (dword 0: t as FP32), primitive 7 ...
    assert intersect(triangle)["dw"][0] == 0x40000000 and intersect(triangle)["status"] == 0
    # ... and the instance moves the ray's origin into object space (x - 1)
    result = intersect(instance)
    assert result["origin"][0] == 0xBF800000 and result["status"] == 0
