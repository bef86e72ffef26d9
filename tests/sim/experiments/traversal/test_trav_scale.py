"""The traversal loop at scale (``sim/experiments/traversal/scale.py``): every intersect and stack
instruction through a session, the loop's decisions from the session's outputs, the same closest
hits and instruction counts as the golden wave-batched loop (``golden/bvh/wavefront.py``).

Default tier: sessions whose "RTL" is a second instance of the block's golden model (quick; the
session still compares every output with its own golden model), and a corrupted output caught.
Verilator tier: a small run on the fast backend's compiled models."""

import json

import numpy as np
import pytest

from gpurtl.golden.bvh import mesh as M
from gpurtl.golden.bvh import wavefront as WF
from gpurtl.golden.bvh import wide as W
from gpurtl.golden.traversal.rays import sphere_rays as make_rays
from gpurtl.sim.core import registry
from gpurtl.sim.experiments.traversal import scale as S
from gpurtl.sim.harness.golden_io import GoldenModel
from gpurtl.sim.harness.session import Exchange, MismatchError, Session


class GoldenBacked(Session):
    """A pipeline session whose outputs come from a golden model of its own, one output per
    cycle; ``corrupt``: the index of an output whose first word gets one bit flipped."""

    def __init__(self, block, params, corrupt=None):
        super().__init__(block, params, golden=True, strict=True)
        self._model = GoldenModel(block, params)
        self._corrupt = corrupt

    def _exchange(self, rows, *, outputs, cycles):
        out = self._model.rows(rows).copy()
        first = self.accepted
        if self._corrupt is not None and first <= self._corrupt < first + len(out):
            out[self._corrupt - first, 0] ^= np.uint32(1 << 3)
        cycle = self.cycle + np.arange(len(out))
        return Exchange(out, cycle, cycle, first + len(out), self.cycle + len(out))


@pytest.fixture(scope="module")
def bunny():
    mesh = M.bunny()
    return mesh, WF.Tables(W.build_wide(mesh, width=8, leaf_pairs=4))


def _sessions(stack_size, slots, corrupt_accel=None, corrupt_stack=None):
    accel, stack = registry.get("ray_accel"), registry.get("ds_bvh_stack")
    return (
        GoldenBacked(accel, accel.resolve({}), corrupt_accel),
        GoldenBacked(
            stack,
            stack.resolve({"stack_size": stack_size, "waves": slots, "lanes": 32}),
            corrupt_stack,
        ),
    )


@pytest.mark.parametrize("stack_size", [16, 8])
def test_the_loop_on_sessions_equals_the_golden_loop(bunny, stack_size):
    mesh, tables = bunny
    o, d = make_rays(mesh, 200, seed=3)
    ref = WF.trace(tables, o, d, stack_size=stack_size)
    accel, stack = _sessions(stack_size, 4)
    res = S.trace(tables, o, d, accel, stack, slots=4, stack_size=stack_size)
    assert np.array_equal(res.prim, ref.prim)
    assert np.array_equal(res.t, ref.t)
    assert (res.prim >= 0).sum() > 50
    for name in ("steps", "box_tests", "tri_tests", "overflows", "walkback_steps"):
        assert np.array_equal(res.counts[name], ref.counts[name]), name
    assert np.array_equal(res.counts["stack_ops"], ref.counts["pops"])
    intersect = int(ref.counts["steps"].sum())
    assert (accel.report.passed, accel.report.failed) == (intersect, 0)
    assert (stack.report.passed, stack.report.failed) == (intersect, 0)
    # 200 rays in waves of 32 through 4 slots: waves were swapped in as slots freed up
    assert res.rounds > ref.counts["steps"].max()
    # the small ring overflows, so the walk-back runs on the sessions' answers
    assert (ref.counts["overflows"].sum() > 0) == (stack_size == 8)
    assert (res.counts["walkback_steps"].sum() > 0) == (stack_size == 8)


def test_obb_nodes_run_through_the_accelerator():
    """OBB box nodes: the accelerator rotates the ray; the loop is the same."""
    from gpurtl.golden.bvh import builder as B

    mesh = M.bunny()
    tables = WF.Tables(W.build_wide(mesh, width=8, leaf_pairs=4, obb_threshold=B.OBB_THRESHOLD))
    assert ((tables.dwords[tables.kind == WF.KIND_BOX, 7] & 0x7F) != 0x7F).sum() > 10
    o, d = make_rays(mesh, 64, seed=9)
    ref = WF.trace(tables, o, d)
    res = S.trace(tables, o, d, *_sessions(16, 2), slots=2)
    assert np.array_equal(res.prim, ref.prim) and np.array_equal(res.t, ref.t)
    assert np.array_equal(res.counts["steps"], ref.counts["steps"])


@pytest.mark.parametrize("which", ["accel", "stack"])
def test_a_corrupted_output_is_caught(bunny, which):
    mesh, tables = bunny
    o, d = make_rays(mesh, 64, seed=5)
    accel, stack = _sessions(16, 2, **{f"corrupt_{which}": 77})
    with pytest.raises(MismatchError) as caught:
        S.trace(tables, o, d, accel, stack, slots=2)
    session = accel if which == "accel" else stack
    assert session.report.failed == 1
    assert caught.value.mismatch.where.startswith("transaction 77 ")
    assert caught.value.mismatch.field == (
        "dw[0]" if which == "accel" else "stack_addr.valid_entries"
    )


def test_a_tlas_is_refused():
    mesh = M.bunny()
    top = W.build_wide_tlas([(mesh, np.hstack([np.eye(3), np.zeros((3, 1))]))], leaf_pairs=4)
    with pytest.raises(ValueError, match="BLAS"):
        S.trace(WF.Tables(top), np.zeros((1, 3)), np.ones((1, 3)), None, None)


def test_image_size():
    for rays in (1, 1000, 100_000, 123_457):
        w, h = S.image_size(rays)
        assert w % 8 == 0 and h % 4 == 0 and w * h >= rays
        assert w * h < rays + 8 * 4 * (w // 8 + h // 4 + 1)
    assert S.image_size(100_000) == (368, 272)


def test_missing_bunny_falls_back_and_says_so(monkeypatch):
    from gpurtl.golden.bvh import scenes

    def missing():
        raise scenes.SceneUnavailable("needs the `pymeshlab` package", package="pymeshlab")

    monkeypatch.setattr(scenes, "stanford_bunny", missing)
    notes, warned = [], []
    name, mesh = S._bunny(notes, warned.append)
    assert len(mesh) == len(M.bunny()) and "907" in name
    assert warned == notes and "pymeshlab" in notes[0] and "907-triangle" in notes[0]


class _Backend:
    """Stands in for the fast backend: golden-backed sessions."""

    summary = "golden-backed sessions (test)"
    fp_cores = "behavioural"

    def session(self, block, params, *, golden, strict):
        assert golden and strict
        return GoldenBacked(block, params)


def test_the_cli_option_runs_the_scale_loop(tmp_path, monkeypatch, capsys):
    from gpurtl.golden.bvh import scenes
    from gpurtl.sim.backends import BACKENDS
    from gpurtl.sim.tools import cli

    def missing():
        raise scenes.SceneUnavailable("needs the `pymeshlab` package", package="pymeshlab")

    monkeypatch.setattr(scenes, "stanford_bunny", missing)
    monkeypatch.setitem(BACKENDS, "fast-behavioural", _Backend())
    argv = ["experiment", "traversal", "--rtl-scale", "40", "--out", str(tmp_path)]
    assert cli.main(argv) == 0
    out, err = capsys.readouterr()
    assert "907-triangle bunny" in err
    assert "64, bunny (907 tris)" in out  # 40 rays: an 8x8 image (8x4 tiles)
    assert out.count(", 0, yes, ") == len(S.BUILDS)
    summary = (tmp_path / "traversal" / "summary.md").read_text()
    assert summary.count("| 0 | 0 | yes | yes |") == len(S.BUILDS)
    assert cli.main(["report", str(tmp_path / "traversal")]) == 0


@pytest.mark.parametrize(
    "argv,message",
    [
        (["traversal", "--rtl-scale", "0"], "--rtl-scale must be a positive number of rays, not 0"),
        (
            ["obb", "--rtl-scale", "5"],
            "--rtl-scale is an option of experiment `traversal`, not `obb`",
        ),
        (
            ["--rtl-scale", "5"],
            "--rtl-scale is an option of experiment `traversal`, name it: gpurtl experiment "
            "traversal",
        ),
        (
            ["traversal", "--rtl-scale-rays", "ao"],
            "--rtl-scale-rays is an option of --rtl-scale: give --rtl-scale too",
        ),
        (
            ["traversal", "--rtl-scale", "5", "--rtl-scale-rays", "ao,sky"],
            "--rtl-scale-rays must be a comma list of shadow, ao, diffuse1, diffuse2 or `all`, "
            "not 'ao,sky'",
        ),
    ],
)
def test_bad_options_give_one_line(tmp_path, capsys, argv, message):
    from gpurtl.sim.tools import cli

    assert cli.main(["experiment", *argv, "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err == f"gpurtl: error: {message}\n"
    assert not any(tmp_path.iterdir())


@pytest.mark.verilator
def test_small_run_on_the_fast_backend(tmp_path, bunny):
    """Both builds side by side on 512 camera rays of the scale run's scene (the 56k bunny, or
    the packaged one without the scenes extra) with stacks of 8 entries; then rays that overflow
    8-entry stacks on the packaged bunny, so the walk-back runs on the RTL's answers whichever
    scene the first part had."""
    from gpurtl.sim.experiments.traversal.scenes import camera as scene_camera

    mesh, tables = bunny
    o, d = make_rays(mesh, 200, seed=3)
    ref = WF.trace(tables, o, d, stack_size=8)
    assert ref.counts["walkback_steps"].sum() > 0
    label, changes = S.BUILDS[-1]
    walk = S._run_build(tables, o, d, label, changes, "fast-behavioural", ref, 8)
    assert walk["accel_report"] == [walk["intersect"], 0, 0]
    assert walk["stack_report"] == [walk["stack"], 0, 0]
    assert walk["same_hits"] and all(walk["same_counts"].values())

    camera = lambda tris: scene_camera(tris, 1, False)[0]  # noqa: E731 - the default run's camera
    data = S.measure(512, camera, backend="fast-behavioural", stack_size=8)
    sc = data["scale"]
    assert sc["rays"] >= 512 and len(sc["builds"]) == len(S.BUILDS)
    for b in sc["builds"]:
        assert b["intersect"] == sc["golden"]["intersect"] > 512
        assert b["stack"] == sc["golden"]["stack"]
        assert b["accel_report"] == [b["intersect"], 0, 0]
        assert b["stack_report"] == [b["stack"], 0, 0]
        assert b["same_hits"] and all(b["same_counts"].values())
        assert b["hits"] == sc["golden"]["hits"]
        assert 0 < b["pair_instructions"] < b["intersect"]
    result = S.report(data, tmp_path)
    assert "| 0 | 0 | yes | yes |" in (tmp_path / "summary.md").read_text()
    assert result["rows"][0][1].startswith(str(sc["rays"]))


def _check_sets(sc, names):
    """Every ray set of a scale run: each build gave the golden loop's hits and counts with every
    output checked, and first-hit rays left before their stack instruction."""
    assert [rs["name"] for rs in sc["sets"]] == list(names)
    for rs in sc["sets"]:
        g = rs["golden"]
        assert rs["first_hit"] == (rs["name"] in ("shadow", "ao"))
        assert (rs["extent"] is None) == rs["name"].startswith("diffuse")
        assert rs["rays"] > 0 and g["intersect"] > rs["rays"]
        for b in rs["builds"]:
            assert b["accel_report"] == [b["intersect"], 0, 0], rs["name"]
            assert b["stack_report"] == [b["stack"], 0, 0], rs["name"]
            assert b["same_hits"] and all(b["same_counts"].values()), rs["name"]
            assert (b["intersect"], b["stack"], b["hits"]) == (
                g["intersect"],
                g["stack"],
                g["hits"],
            )
            if rs["first_hit"]:
                # each ray with a hit ended at it, without that step's stack instruction
                assert b["intersect"] - b["stack"] == b["hits"] > 0
            else:
                assert b["intersect"] == b["stack"]


def _all_sets(rays, backend, **kw):
    from gpurtl.sim.experiments import traversal as T
    from gpurtl.sim.experiments.traversal import scenes as SC

    camera = lambda tris: SC.camera(tris, 1, False)[0]  # noqa: E731 - the default run's camera
    sets = ("camera", *T.RAY_SETS[1:])
    data = S.measure(rays, camera, backend=backend, sets=sets, derive=SC.scale_sets, **kw)
    return data, sets[1:]


def test_ray_sets_on_sessions_equal_the_golden_loop(tmp_path, monkeypatch):
    """Shadow, AO and diffuse rays from the camera rays' hits through the loop on sessions:
    the golden loop's hits and counts, first-hit termination on the accelerator's results."""
    from gpurtl.golden.bvh import scenes
    from gpurtl.sim.backends import BACKENDS

    def missing():
        raise scenes.SceneUnavailable("needs the `pymeshlab` package", package="pymeshlab")

    monkeypatch.setattr(scenes, "stanford_bunny", missing)
    monkeypatch.setitem(BACKENDS, "golden-backed", _Backend())
    data, names = _all_sets(300, "golden-backed", builds=S.BUILDS[:1], stack_size=8)
    _check_sets(data["scale"], names)
    S.report(data, tmp_path)
    rows = {
        line.split(" | ")[0][2:]: line.split(" | ")
        for line in (tmp_path / "summary.md").read_text().splitlines()
        if line.startswith("| ") and line.split(" | ")[0][2:] in names
    }
    assert sorted(rows) == sorted(names)
    for name, cells in rows.items():
        assert cells[3] == ("yes" if name in ("shadow", "ao") else "no")
        assert cells[7:9] == ["0", "0"] and cells[-2] == "yes"


def test_the_ray_sets_option(tmp_path, monkeypatch, capsys):
    from gpurtl.golden.bvh import scenes
    from gpurtl.sim.backends import BACKENDS
    from gpurtl.sim.tools import cli

    def missing():
        raise scenes.SceneUnavailable("needs the `pymeshlab` package", package="pymeshlab")

    monkeypatch.setattr(scenes, "stanford_bunny", missing)
    monkeypatch.setitem(BACKENDS, "fast-behavioural", _Backend())
    argv = ["experiment", "traversal", "--rtl-scale", "64", "--rtl-scale-rays", "ao,shadow"]
    assert cli.main([*argv, "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.count("ao (") == out.count("shadow (") == len(S.BUILDS)
    assert out.count(", 0, yes, ") == 3 * len(S.BUILDS)
    sets = json.loads((tmp_path / "traversal" / "data.json").read_text())["scale"]["sets"]
    assert [rs["name"] for rs in sets] == ["ao", "shadow"]


@pytest.mark.verilator
def test_ray_sets_on_the_fast_backend():
    """A small sample of every ray set through both builds on the fast backend."""
    data, names = _all_sets(256, "fast-behavioural")
    _check_sets(data["scale"], names)
