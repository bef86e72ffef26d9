"""Batch golden model of the ray accelerator (``golden/ray_accel/vector/batch.py``) against the scalar
model, row for row on packed words; its FP32 shortcuts against ``golden/fp32``; the word-array
helpers against ``sim/core/layouts``; and the fast word stimulus."""

import numpy as np
import pytest

from gpurtl.facts.ray_accel import INSTR_LAYOUT, OUT_LAYOUT
from gpurtl.golden import fp32
from gpurtl.golden.ray_accel.scalar import box_test as bt
from gpurtl.golden.ray_accel.scalar.intersect import PATHS, IntersectModel
from gpurtl.golden.ray_accel.vector import batch, batch_box, batch_fp, bitfields
from gpurtl.sim.blocks import ray_accel_words
from gpurtl.sim.core import registry
from gpurtl.sim.core.layouts import pack
from gpurtl.sim.core.words import dicts_from_words, words_from_dicts

COUNT = 2000


@pytest.fixture(scope="module")
def block():
    return registry.get("ray_accel")


@pytest.fixture(scope="module")
def instructions(block):
    return block.stimulus(np.random.default_rng(2024), COUNT, **block.resolve())


@pytest.fixture(scope="module")
def words(instructions):
    return words_from_dicts(INSTR_LAYOUT, instructions)


@pytest.fixture(scope="module")
def expected(instructions):
    """The scalar model's packed results (default paths, no flushing)."""
    return scalar_words(instructions)


def scalar_words(instructions, **kwargs):
    model = IntersectModel(**kwargs)
    return words_from_dicts(OUT_LAYOUT, [model(tx) for tx in instructions])


def mismatched_rows(expected, got):
    assert expected.shape == got.shape and got.dtype == np.uint32
    return np.nonzero(np.any(expected != got, axis=1))[0].tolist()


# --- FP32 shortcuts -------------------------------------------------------------------------------


def _operands(rng):
    special = np.array(fp32.special_values(), dtype=np.uint32)
    a, b = np.meshgrid(special, special)
    rand = rng.integers(0, 1 << 32, (2, 200000), dtype=np.uint64).astype(np.uint32)
    # random patterns near each other exercise cancellation and subnormal results
    near = rand[0] ^ (rng.integers(0, 1 << 8, 200000, dtype=np.uint64).astype(np.uint32))
    return (
        np.concatenate([a.ravel(), rand[0], rand[0]]),
        np.concatenate([b.ravel(), rand[1], near ^ np.uint32(0x80000000)]),
    )


@pytest.mark.parametrize("ftz", [False, True])
def test_fp_shortcuts_match_golden_fp32(ftz):
    a, b = _operands(np.random.default_rng(7))
    for name in ("add", "sub", "mul"):
        assert np.array_equal(
            getattr(batch_fp, name)(a, b, ftz=ftz), getattr(fp32, name)(a, b, ftz=ftz)
        ), name
    for name in ("lt", "le"):
        assert np.array_equal(
            getattr(batch_fp, name)(a, b, ftz=ftz), getattr(fp32, name)(a, b, ftz=ftz)
        ), name


@pytest.mark.parametrize("ftz", [False, True])
def test_grow_matches_fma(ftz):
    rng = np.random.default_rng(8)
    special = np.array(fp32.special_values(), dtype=np.uint32)
    max_t = np.concatenate(
        [
            np.repeat(special, 256),
            rng.integers(0, 1 << 32, 256 * 400, dtype=np.uint64).astype(np.uint32),
        ]
    )
    g = np.tile(np.arange(256), len(max_t) // 256)
    expected = bt.grow_max(max_t, g, ftz=ftz)
    got = np.where(g == 0, max_t, batch_fp.grow(max_t, g, ftz=ftz))
    assert np.array_equal(got, expected)


# --- word arrays ----------------------------------------------------------------------------------


def test_words_round_trip_and_field_reads(instructions, words):
    assert words.dtype == np.uint32
    assert words.shape == (COUNT, (INSTR_LAYOUT.size + 31) // 32)
    first = instructions[:50]
    assert dicts_from_words(INSTR_LAYOUT, words[:50]) == [
        dict(tx, node_ptr=list(tx["node_ptr"])) for tx in first
    ]
    for n, tx in enumerate(first):
        bits = pack(INSTR_LAYOUT, tx)
        assert int.from_bytes(words[n].astype("<u4").tobytes(), "little") == bits
    f = batch.decode_instr_words(words)
    assert f["node"][:, 1, 31].tolist() == [tx["node"][1][31] for tx in instructions]
    assert f["box_grow"].tolist() == [tx["desc"]["box_grow"] for tx in instructions]
    assert f["pointer_flags"].tolist() == [tx["pointer_flags"] for tx in instructions]
    assert f["dir"][:, 2].tolist() == [tx["ray"]["dir"][2] for tx in instructions]


def test_write_fields_keeps_other_bits(words):
    copy = words[:100].copy()
    offset, width = bitfields.field_span(INSTR_LAYOUT, "desc", "box_grow")
    bitfields.write_fields(copy, [offset], width, np.full((100, 1), 0xA5))
    f = batch.decode_instr_words(copy)
    assert (f["box_grow"] == 0xA5).all()
    copy_back = copy.copy()
    bitfields.write_fields(
        copy_back, [offset], width, batch.decode_instr_words(words[:100])["box_grow"][:, None]
    )
    assert np.array_equal(copy_back, words[:100])


# --- the model, row for row -----------------------------------------------------------------------


def test_stimulus_covers_every_kind(instructions):
    kinds = set()
    for tx in instructions:
        if tx["dual"]:
            kinds |= {("dual", p & 7) for p in tx["node_ptr"]}
        else:
            kinds.add(("single", tx["node_ptr"][0] & 0xF))
    assert {("single", t) for t in (0, 1, 5, 6)} <= kinds
    assert {("dual", t) for t in range(8)} <= kinds
    assert any(
        tx["node"][0][7] & 0x7F != 0x7F
        for tx in instructions
        if not tx["dual"] and tx["node_ptr"][0] & 0xF == 5
    )


@pytest.mark.parametrize("ftz", [False, True])
def test_batch_equals_scalar(instructions, words, expected, ftz):
    reference = scalar_words(instructions, ftz=True) if ftz else expected
    got = batch.intersect_words(words, ftz=ftz)
    assert mismatched_rows(reference, got) == []
    status = bitfields.read_field(got, *bitfields.field_span(OUT_LAYOUT, "status"))
    assert set(status.tolist()) == {0, 1, 2}


@pytest.mark.parametrize(
    "paths", [{"box"}, {"box", "obb", "instance"}, {"box", "triangle", "legacy_triangle"}]
)
def test_batch_equals_scalar_restricted_paths(instructions, words, paths):
    part = slice(0, 400)
    reference = scalar_words(instructions[part], paths=paths)
    got = batch.intersect_words(words[part], paths=paths)
    assert mismatched_rows(reference, got) == []
    if "triangle" not in paths:
        assert any(d["status"] == 1 for d in dicts_from_words(OUT_LAYOUT, got))


def test_chunks_give_the_same_rows(words, monkeypatch):
    whole = batch.intersect_words(words[:300])
    monkeypatch.setattr(batch, "CHUNK", 7)
    assert np.array_equal(batch.intersect_words(words[:300]), whole)


def test_perturbed_row_is_caught(words, expected):
    """The comparison names exactly the row whose input the batch saw differently."""
    part = slice(0, 300)
    changed = words[part].copy()
    f = batch.decode_instr_words(changed)
    rows = [
        n
        for n in range(300)
        if not f["dual"][n]
        and f["node_ptr"][n, 0] & 0xF == 5
        and batch.intersect_words(changed[n : n + 1])[0, 0] != 0xFFFFFFFF
    ]
    victim = rows[0]
    offset, _ = bitfields.field_span(INSTR_LAYOUT, "ray", "extent")
    changed[victim] = words[victim]
    bitfields.write_fields(
        changed, [offset], 32, np.where(np.arange(300) == victim, 0x80000000, f["extent"])[:, None]
    )
    assert mismatched_rows(expected[part], batch.intersect_words(changed)) == [victim]


def _no_wide_stages(ptrs, keys, sort_tri_first, wide, enable, *, ftz=False):
    return original_sort(ptrs, keys, sort_tri_first, np.zeros_like(wide), enable, ftz=ftz)


original_sort = batch_box.sort_slots


def _propagating_maxnum(a, b, *, ftz=False):
    return np.asarray(fp32.fmax(a, b, ftz=ftz), dtype=np.uint32)


@pytest.mark.parametrize(
    "name, broken", [("sort_slots", _no_wide_stages), ("maxnum", _propagating_maxnum)]
)
def test_broken_variants_are_caught(words, expected, monkeypatch, name, broken):
    part = slice(0, 400)
    monkeypatch.setattr(batch_box, name, broken)
    assert len(mismatched_rows(expected[part], batch.intersect_words(words[part]))) > 0


def test_bad_words_shape():
    with pytest.raises(ValueError, match="`words` must be a uint32 array"):
        batch.intersect_words(np.zeros((3, 5), dtype=np.uint32))


# --- registry hooks -------------------------------------------------------------------------------


def test_hooks_fast_stimulus(block, monkeypatch):
    monkeypatch.setattr(ray_accel_words, "POOL", 300)
    params = block.resolve()
    count = 3000  # above the pool, so rows are varied
    words = block.stimulus_words(np.random.default_rng(11), count, **params)
    assert words.dtype == np.uint32 and words.shape == (count, (INSTR_LAYOUT.size + 31) // 32)
    again = block.stimulus_words(np.random.default_rng(11), count, **params)
    assert np.array_equal(words, again)
    assert len(np.unique(words, axis=0)) > 0.75 * count  # a fifth are pool rows unchanged
    got = block.golden_words(words, **params)
    sample = np.random.default_rng(0).choice(count, 300, replace=False)
    expected = scalar_words(dicts_from_words(INSTR_LAYOUT, words[sample]))
    assert mismatched_rows(expected, got[sample]) == []


def test_hooks_use_build_paths(block):
    params = block.resolve({"triangles": "0", "transforms": "0"})
    words = block.stimulus_words(np.random.default_rng(3), 200, **params)
    expected = scalar_words(
        dicts_from_words(INSTR_LAYOUT, words),
        paths=PATHS - {"triangle", "legacy_triangle", "obb", "instance"},
    )
    assert mismatched_rows(expected, block.golden_words(words, **params)) == []


@pytest.mark.slow
def test_batch_equals_scalar_100k(block):
    params = block.resolve()
    words = block.stimulus_words(np.random.default_rng(100), 100_000, **params)
    got = block.golden_words(words, **params)
    expected = scalar_words(dicts_from_words(INSTR_LAYOUT, words))
    assert mismatched_rows(expected, got) == []
