"""Readable inputs and outputs: array shapes in JSON order, field notes (selector members and unused
VGPRs), ``--input -``, and ``gpurtl encode`` / ``gpurtl decode`` of wait words, matrix tiles and
ray results, each checked against an independent computation (the ISA's bit layouts written out
here, numpy, hand-worked geometry)."""

import io
import json

import numpy as np
import pytest
from amaranth.hdl import unsigned
from amaranth.lib import data

from gpurtl.facts.fp32 import bits_f32, f32_bits
from gpurtl.sim.core import jsonio, layouts, registry
from gpurtl.sim.tools.cli import main
from gpurtl.sim.tools.waitcnt_text import WaitTextError, decode_word, encode_text


def run(capsys, *argv, stdin=None, monkeypatch=None):
    if stdin is not None:
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


# --- shapes -------------------------------------------------------------------------------------

PAIR = data.StructLayout({"a": data.ArrayLayout(data.ArrayLayout(unsigned(32), 32), 2)})


def test_shapes_are_written_outer_index_first():
    assert layouts.describe(PAIR) == "{a:u32[2][32]}"
    value = layouts.zero(PAIR)["a"]  # what JSON holds: 2 lists of 32
    assert len(value) == 2 and all(len(row) == 32 for row in value)
    assert "a[1][31]" in {leaf.path for leaf in layouts.leaves(PAIR)}


def test_a_list_in_the_other_order_is_told_the_shape():
    natural = {"a": [[0, 0] for _ in range(32)]}  # read as u32[32][2]
    with pytest.raises(jsonio.InputError) as error:
        jsonio.parse_value(PAIR, natural, "in.jsonl:1")
    assert str(error.value) == (
        "in.jsonl:1: field `a` must be a list of 2 (shape u32[2][32], outer index first), "
        "not a list of 32"
    )
    with pytest.raises(jsonio.InputError, match=r"field `a\[0\]` must be a list of 32"):
        jsonio.parse_value(PAIR, {"a": [[0] * 31, [0] * 32]}, "x:1")
    with pytest.raises(jsonio.InputError, match=r"`a\[0\]\[0\]` must be a single value \(u32\)"):
        jsonio.parse_value(PAIR, {"a": [[[0]] * 32] * 2}, "x:1")
    good = jsonio.parse_value(PAIR, {"a": [list(range(32)), [7] * 32]}, "x:1")
    assert good["a"][0][31] == 31 and good["a"][1][0] == 7


def test_list_writes_matrix_tiles_as_vgprs_then_lanes(capsys):
    code, out, _ = run(capsys, "list", "matrix_core")
    assert code == 0
    assert "a:u32[4][32] b:u32[8][32] c:u32[8][32]" in out and "d:u32[8][32]" in out


# --- field notes --------------------------------------------------------------------------------

#: Integer fields whose values select one of several things (their names in the layouts).
SELECTORS = ("op", "heuristic", "status", "state", "nav", "omm_format")


@pytest.mark.parametrize("block", registry.blocks(), ids=lambda b: b.name)
def test_every_selector_field_names_its_values(block):
    params = block.resolve(block.small)
    notes = block.field_notes(params)
    for side, shape in zip(("in", "out"), block.layouts(**params)):
        for leaf in layouts.leaves(shape):
            name = leaf.path.rsplit(".", 1)[-1]
            if name in SELECTORS and leaf.kind != "enum":
                assert notes[side].get(leaf.path), f"{block.name} {side} `{leaf.path}` has no note"


# The instruction tables of the families (AMD RDNA 4 ISA guide / LLVM gfx12_asm_wmma_w32.s),
# written out here: the names in op order and the A, B VGPRs each reads.
FAMILY_TABLE = {
    "f16_f32": [("v_wmma_f32_16x16x16_f16", 4, 4), ("v_swmmac_f32_16x16x32_f16", 4, 8)],
    "iu4_i32": [
        ("v_wmma_i32_16x16x16_iu4", 1, 1),
        ("v_wmma_i32_16x16x32_iu4", 2, 2),
        ("v_swmmac_i32_16x16x32_iu4", 1, 2),
        ("v_swmmac_i32_16x16x64_iu4", 2, 4),
    ],
}


@pytest.mark.parametrize("family", FAMILY_TABLE)
def test_matrix_op_names_its_instructions_and_unused_vgprs(family, capsys):
    table = FAMILY_TABLE[family]
    block = registry.get("matrix_core")
    notes = block.field_notes(block.resolve({"family": family}))["in"]
    assert notes["op"] == ", ".join(f"{i} {name}" for i, (name, _, _) in enumerate(table))
    a_total, b_total = max(t[1] for t in table), max(t[2] for t in table)
    for i, (_, a_used, b_used) in enumerate(table):
        for operand, used, total in (("a", a_used, a_total), ("b", b_used, b_total)):
            if used < total:
                span = (
                    f"{operand}[{used}]" if used == total - 1 else f"{operand}[{used}..{total - 1}]"
                )
                assert (
                    f"op {i} reads" in notes[operand] and f"leaves {span} unused" in notes[operand]
                )
    code, out, _ = run(capsys, "export", "matrix_core", "-p", f"family={family}", "--ports-md")
    assert code == 0
    assert f"| `op` | [{0 if len(table) == 2 else '1:0'}] |" in out and table[-1][0] in out
    assert "* `b`: B tile" in out


def test_list_json_carries_the_notes(capsys):
    code, out, _ = run(capsys, "list", "ray_accel", "--json")
    assert code == 0
    (entry,) = json.loads(out)
    assert "closest" in entry["notes"]["in"]["desc.heuristic"]
    meaning = {f["field"]: f["meaning"] for f in entry["fields"]["out"]}
    assert meaning["status"].startswith("0 ok, 1 ")


# --- standard input -----------------------------------------------------------------------------


def test_run_reads_its_input_from_stdin(capsys, monkeypatch):
    lines = '{"a": 1.5, "b": 2.25}\n{"a": "3f800000", "b": -1}\n'
    code, out, err = run(
        capsys, "run", "fp32_add", "--input", "-", stdin=lines, monkeypatch=monkeypatch
    )
    assert code == 0, err
    got = [bits_f32(int(json.loads(line)["z"], 16)) for line in out.splitlines()]
    assert got == [3.75, 0.0] and "2 passed, 0 failed" in err


def test_an_empty_stdin_is_one_line(capsys, monkeypatch):
    code, _, err = run(
        capsys, "run", "fp32_add", "--input", "-", stdin="\n# nothing\n", monkeypatch=monkeypatch
    )
    assert code == 2 and err.strip() == (
        "gpurtl: error: <stdin>: no transactions (the input has no JSON lines)"
    )


def test_stdin_errors_name_stdin_and_the_line(capsys, monkeypatch):
    code, _, err = run(
        capsys,
        "run",
        "fp32_add",
        "--input",
        "-",
        stdin='{"a": 1, "b": 2}\n{"a": 1, "q": 2}\n',
        monkeypatch=monkeypatch,
    )
    assert code == 2 and "<stdin>:2: unknown field `q`" in err


# --- wait words ---------------------------------------------------------------------------------

SOPP = 0b1_0111_1111  # bits 31-23 of a SOPP word (RDNA 4 ISA guide, SOPP encoding)
#: GFX12 single-count waits and their SOPP opcodes (RDNA 4 ISA guide, "SOPP" opcode table).
GFX12_OPCODES = {
    "s_wait_loadcnt": 64,
    "s_wait_storecnt": 65,
    "s_wait_samplecnt": 66,
    "s_wait_bvhcnt": 67,
    "s_wait_expcnt": 68,
    "s_wait_dscnt": 70,
    "s_wait_kmcnt": 71,
}


def sopp(opcode, simm16):
    return SOPP << 23 | opcode << 16 | simm16


def test_wait_loadcnt_0_is_the_documented_word(capsys):
    code, out, _ = run(capsys, "encode", "waitcnt", "s_wait_loadcnt 0")
    assert code == 0 and out.split()[0] == "3217031168" == str(sopp(64, 0))
    code, out, _ = run(capsys, "decode", "waitcnt", "3217031168")
    assert code == 0 and out == "s_wait_loadcnt 0\n"


@pytest.mark.parametrize("name", GFX12_OPCODES)
def test_gfx12_single_waits_match_the_isa_layout(name):
    rng = np.random.default_rng(len(name))
    for count in [0, 1, 63, 65535, *rng.integers(0, 1 << 16, 5).tolist()]:
        word = sopp(GFX12_OPCODES[name], count)
        assert encode_text(f"{name} {count}") == word
        assert encode_text(f"{name.upper()} 0x{count:x}") == word
        assert decode_word(word) == f"{name} {count}"


def test_gfx12_combined_waits_match_the_isa_layout():
    # s_wait_loadcnt_dscnt (0x48): load count in [13:8], ds count in [5:0]
    for load, ds in [(0, 0), (1, 0), (63, 5), (7, 63)]:
        word = sopp(0x48, load << 8 | ds)
        assert encode_text(f"s_wait_loadcnt_dscnt loadcnt({load}) dscnt({ds})") == word
        assert encode_text(decode_word(word)) == word
    assert encode_text("s_wait_loadcnt_dscnt 0") == sopp(0x48, 0)
    assert encode_text("s_wait_storecnt_dscnt dscnt(2)") == sopp(0x49, 63 << 8 | 2)


def test_gfx11_waitcnt_matches_llvm_encodings():
    # LLVM test/MC/AMDGPU gfx11 s_waitcnt: "s_waitcnt vmcnt(0) lgkmcnt(0)" is [0x07,0x00,0x89,0xbf]
    assert encode_text("s_waitcnt vmcnt(0) lgkmcnt(0)", "gfx11") == 0xBF890007
    # exp [2:0], lgkm [9:4], vm [15:10]; fields left out are all ones
    assert encode_text("s_waitcnt expcnt(2)", "gfx11") == sopp(9, 63 << 10 | 63 << 4 | 2)
    # SOPK s_waitcnt_vscnt null, N: 0xB in 31-28, opcode 0x18 in 27-23, null (0x7C) in 22-16
    assert (
        encode_text("s_waitcnt_vscnt null, 5", "gfx11") == 0xB << 28 | 0x18 << 23 | 0x7C << 16 | 5
    )
    assert encode_text("s_waitcnt_vscnt 5", "gfx11") == encode_text(
        "s_waitcnt_vscnt null, 5", "gfx11"
    )


def test_gfx9_and_gfx10_split_vmcnt():
    # GFX9/GFX10 s_waitcnt (0x0C): vm low bits [3:0], high bits [15:14], exp [6:4], lgkm from 8
    for generation, lgkm_bits in (("gfx10", 6), ("gfx9", 4)):
        vm, exp, lgkm = 0b110101, 3, 1
        word = sopp(0x0C, (vm & 15) | (vm >> 4) << 14 | exp << 4 | lgkm << 8)
        text = f"s_waitcnt vmcnt({vm}) expcnt({exp}) lgkmcnt({lgkm})"
        assert encode_text(text, generation) == word
        assert decode_word(word, generation) == text
        with pytest.raises(WaitTextError, match=f"0..{(1 << lgkm_bits) - 1}"):
            encode_text(f"s_waitcnt lgkmcnt({1 << lgkm_bits})", generation)


@pytest.mark.parametrize("generation", ["gfx12", "gfx11", "gfx10", "gfx9"])
def test_every_wait_word_round_trips(generation):
    from gpurtl.facts.waitcnt import profile

    rng = np.random.default_rng(7)
    for form in profile(generation).waits:
        for simm16 in rng.integers(0, 1 << 16, 20).tolist():
            word = form.encode() & ~0xFFFF | simm16
            assert encode_text(decode_word(word, generation), generation) == word


@pytest.mark.parametrize(
    "argv, message",
    [
        (["encode", "waitcnt", "s_wait_fooocnt 1"], "argument 1: `s_wait_fooocnt` is not a wait"),
        (["encode", "waitcnt", "s_wait_loadcnt"], "needs a count"),
        (["encode", "waitcnt", "s_wait_loadcnt 70000"], "must be in 0..65535, not 70000"),
        (["encode", "waitcnt", "s_wait_loadcnt_dscnt vmcnt(0)"], "has the counts loadcnt, dscnt"),
        (["decode", "waitcnt", "12"], "0x0000000c is not a wait instruction of gfx12"),
        (["decode", "waitcnt", "zz"], "must be an integer (decimal or 0x...), not 'zz'"),
        (["decode"], "decode needs WHAT"),
        (["decode", "ray", "--input", "x.jsonl"], "needs --instructions FILE"),
        (["encode", "matrix", "1"], "values on the command line are for waitcnt"),
    ],
)
def test_codec_mistakes_are_one_line(argv, message, capsys):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and message in err, err


def test_wait_words_through_files_and_stdin(tmp_path, capsys, monkeypatch):
    source = tmp_path / "waits.txt"
    source.write_text("# two waits\ns_wait_loadcnt 0\n\ns_wait_dscnt 3\n")
    code, _, _ = run(capsys, "encode", "waitcnt", "--input", source, "-o", tmp_path / "w.txt")
    assert code == 0
    text = (tmp_path / "w.txt").read_text()
    code, out, _ = run(
        capsys, "decode", "waitcnt", "--input", "-", stdin=text, monkeypatch=monkeypatch
    )
    assert code == 0 and out == "s_wait_loadcnt 0\ns_wait_dscnt 3\n"


# --- matrix tiles -------------------------------------------------------------------------------


def _exact(rng, shape, scale=4):
    """Numbers that FP16 and the FP32 sums hold exactly: small multiples of 1/scale."""
    return (rng.integers(-8, 9, shape) / scale).astype(np.float64)


def _golden(family, line):
    block = registry.get("matrix_core")
    params = block.resolve({"family": family})
    shape, _ = block.layouts(**params)
    tx = jsonio.parse_value(shape, line, "x", block.input_defaults(params))
    return block.golden(**params)(tx)


def _through_cli(capsys, tmp_path, family, lines):
    source = tmp_path / "tiles.jsonl"
    source.write_text("".join(json.dumps(line) + "\n" for line in lines))
    code, out, err = run(capsys, "encode", "matrix", "-p", f"family={family}", "--input", source)
    assert code == 0, err
    return [json.loads(line) for line in out.splitlines()]


def test_matrix_encode_lays_out_a_and_c_as_the_calculator_does(tmp_path, capsys):
    rng = np.random.default_rng(3)
    a, b, c = _exact(rng, (16, 16)), _exact(rng, (16, 16)), _exact(rng, (16, 16))
    line = {"op": 0, "a": a.tolist(), "b": b.tolist(), "c": c.tolist()}
    (tx,) = _through_cli(capsys, tmp_path, "f16_f32", [line])
    f16 = a.astype(np.float16).view(np.uint16).astype(int)
    for lane in range(32):
        row, half = lane % 16, lane // 16
        for j in range(8):  # lane element j holds depth (j // 4) * 8 + half * 4 + j % 4
            k = (j // 4) * 8 + half * 4 + j % 4
            word = tx["a"][j // 2][lane]
            assert (word >> (16 * (j % 2))) & 0xFFFF == f16[row, k], (lane, j)
        for j in range(8):  # C: lane holds column lane % 16, element j is row j + 8 * half
            assert tx["c"][j][lane] == f32_bits(float(c[j + 8 * half, lane % 16]))
    assert tx["op"] == 0 and tx["idx"] == [0] * 32


def test_matrix_round_trip_against_numpy(tmp_path, capsys, monkeypatch):
    rng = np.random.default_rng(4)
    a, b, c = _exact(rng, (16, 16)), _exact(rng, (16, 16)), _exact(rng, (16, 16), 1)
    (tx,) = _through_cli(
        capsys,
        tmp_path,
        "f16_f32",
        [{"op": "v_wmma_f32_16x16x16_f16", "a": a.tolist(), "b": b.tolist(), "c": c.tolist()}],
    )
    out = _golden("f16_f32", tx)
    text = json.dumps(
        jsonio.to_jsonable(registry.get("matrix_core").layouts(family="f16_f32")[1], out)
    )
    code, decoded, _ = run(
        capsys, "decode", "matrix", "--input", "-", stdin=text + "\n", monkeypatch=monkeypatch
    )
    assert code == 0
    d = np.array(json.loads(decoded)["d"])
    np.testing.assert_array_equal(d, a @ b + c)
    # an input line decodes back to its matrices
    code, back, _ = run(
        capsys, "decode", "matrix", "--input", "-", stdin=json.dumps(tx), monkeypatch=monkeypatch
    )
    back = json.loads(back)
    assert back["op"] == "v_wmma_f32_16x16x16_f16"
    np.testing.assert_array_equal(np.array(back["a"]), a)
    np.testing.assert_array_equal(np.array(back["b"]), b)


def test_sparse_matrix_round_trip_against_numpy(tmp_path, capsys):
    rng = np.random.default_rng(5)
    logical = np.zeros((16, 32))
    for r in range(16):
        for g in range(8):
            kept = rng.choice(4, size=int(rng.integers(0, 3)), replace=False)
            logical[r, 4 * g + kept] = _exact(rng, len(kept))
    b, c = _exact(rng, (32, 16)), _exact(rng, (16, 16), 1)
    for key in (0, 1):
        (tx,) = _through_cli(
            capsys,
            tmp_path,
            "f16_f32",
            [{"op": 1, "a": logical.tolist(), "b": b.tolist(), "c": c.tolist(), "index_key": key}],
        )
        d = np.array(_decode_d("f16_f32", _golden("f16_f32", tx)))
        np.testing.assert_array_equal(d, logical @ b + c)


def _decode_d(family, out):
    from gpurtl.sim.tools.matrix_tiles import decode_line

    return decode_line({"d": out["d"]}, "x", family=family)["d"]


def test_integer_matrix_round_trip_against_numpy(tmp_path, capsys):
    rng = np.random.default_rng(6)
    a, b = rng.integers(-128, 128, (16, 16)), rng.integers(0, 256, (16, 16))
    c = rng.integers(-(1 << 20), 1 << 20, (16, 16))
    (tx,) = _through_cli(
        capsys,
        tmp_path,
        "iu8_i32",
        [{"op": 0, "a": a.tolist(), "b": b.tolist(), "c": c.tolist(), "b_signed": 0}],
    )
    np.testing.assert_array_equal(np.array(_decode_d("iu8_i32", _golden("iu8_i32", tx))), a @ b + c)


@pytest.mark.parametrize(
    "line, message",
    [
        ({"op": 5}, "field `op` must be one of 0 v_wmma_f32_16x16x16_f16, 1 v_swmmac"),
        (
            {"op": 0, "a": [[0] * 16] * 15},
            "field `a` must be 16 rows of 16 numbers, not a list of 15",
        ),
        (
            {"op": 1, "a": [[1, 1, 1, 0] * 8] * 16, "b": [[0] * 16] * 32, "c": [[0] * 16] * 16},
            "field `a[0]`: v_swmmac_f32_16x16x32_f16 is 2:4 sparse: at most two non-zero values in "
            "each group of four, not 3 in a[0][0..3]",
        ),
        (
            {"op": 0, "a": [["x"] * 16] * 16, "b": [[0] * 16] * 16, "c": [[0] * 16] * 16},
            "field `a[0][0]` must be a number",
        ),
        ({"op": 0, "q": 1}, "unknown field `q`"),
    ],
)
def test_matrix_mistakes_name_the_field(line, message, tmp_path, capsys):
    source = tmp_path / "bad.jsonl"
    source.write_text(json.dumps(line) + "\n")
    code, _, err = run(capsys, "encode", "matrix", "--input", source)
    assert code == 2 and f"bad.jsonl:1: {message}" in err, err


# --- ray results --------------------------------------------------------------------------------

BOX = {
    "node": {
        "kind": "box8",
        "internal_base": 32,
        "children": [
            {"min": [4, -1, -1], "max": [5, 1, 1], "type": "box"},
            {"min": [1, -1, -1], "max": [2, 1, 1], "type": "triangle", "range": 2},
            {"min": [1, 5, -1], "max": [2, 6, 1], "type": "box"},
        ],
    },
    "ray": {"origin": [0, 0, 0], "dir": [1, 0, 0]},
}
#: A triangle in the plane z = 5 around the z axis, hit by the ray up the axis at t = 5 with the
#: barycentrics of (0, 0): I (weight of v1) 1/4, J (weight of v2) 1/2.
TRIANGLE = {
    "node": {
        "kind": "triangles",
        "pairs": [
            {"tri0": {"vertices": [[-1, -1, 5], [1, -1, 5], [0, 1, 5]], "prim_id": 7, "geo_id": 3}}
        ],
    },
    "ray": {"origin": [0, 0, 0], "dir": [0, 0, 1]},
}


def test_ray_results_decode_to_hits_order_t_and_ids(tmp_path, capsys):
    source = tmp_path / "nodes.jsonl"
    source.write_text(json.dumps(BOX) + "\n" + json.dumps(TRIANGLE) + "\n")
    instructions = tmp_path / "in.jsonl"
    assert run(capsys, "encode", "--input", source, "-o", instructions)[0] == 0
    block = registry.get("ray_accel")
    params = block.resolve()
    in_layout, out_layout = block.layouts(**params)
    golden = block.golden(**params)
    outs = [
        golden(jsonio.parse_value(in_layout, obj, where, block.input_defaults(params)))
        for where, obj in jsonio.read_json_objects(instructions)
    ]
    results = tmp_path / "out.jsonl"
    jsonio.write_jsonl(results, out_layout, outs)
    code, out, err = run(
        capsys, "decode", "ray", "--input", results, "--instructions", instructions
    )
    assert code == 0, err
    box, tri = (json.loads(line) for line in out.splitlines())
    # the triangle child (x 1..2, leaf base 0) is nearer than the box child (x 4..5, internal
    # base 32: byte address 256); the child at y 5..6 is missed
    assert box["kind"] == "box" and box["hit"]
    assert [(c["type"], c["address"]) for c in box["children"]] == [(0, 0), (5, 256)]
    assert tri["kind"] == "triangles" and tri["hit"]
    first, second = tri["triangles"]
    assert first["hit"] and first["t"] == 5.0 and (first["i"], first["j"]) == (0.25, 0.5)
    assert first["prim_id"] == 7 and first["geo_id"] == 3 and first["opaque"]
    assert not second["hit"] and second["t"] == "Infinity"
    code, out, _ = run(capsys, "decode", "ray", "--input", results, "--node", "box")
    assert code == 0 and json.loads(out.splitlines()[0]) == box


def test_decode_ray_pairs_one_instruction_per_result(tmp_path, capsys):
    instructions = tmp_path / "in.jsonl"
    (tmp_path / "nodes.jsonl").write_text(json.dumps(BOX) + "\n")
    run(capsys, "encode", "--input", tmp_path / "nodes.jsonl", "-o", instructions)
    results = tmp_path / "out.jsonl"
    line = {"dw": [0] * 10, "origin": [0] * 3, "dir": [0] * 3, "status": 0}
    results.write_text((json.dumps(line) + "\n") * 2)
    code, _, err = run(capsys, "decode", "ray", "--input", results, "--instructions", instructions)
    assert code == 2 and "1 instruction for 2 results" in err
