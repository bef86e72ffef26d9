"""``traversal-rtl --frame WxH --cus N``: the tiles and the dispatcher rule, bad values, resume
after an interrupted run, and a small frame on two Dask workers equal to one process's run."""

import json

import numpy as np
import pytest

from gpurtl.sim.experiments.traversal import frame as F
from gpurtl.sim.experiments.traversal import traversal_rtl
from gpurtl.sim.tools import cli


def test_dispatch_is_round_robin_in_dispatch_order():
    # wave w to CU w mod N, each CU's waves in dispatch order
    assert F.dispatch(10, 3) == [[0, 3, 6, 9], [1, 4, 7], [2, 5, 8]]
    assert F.dispatch(4, 4) == [[0], [1], [2], [3]]
    assert F.dispatch(5, 1) == [[0, 1, 2, 3, 4]]


def test_waves_are_8x4_tiles_row_by_row_cut_at_the_edges():
    width, height = 20, 9  # 3 x 3 tiles; the right column 4 wide, the bottom row 1 high
    waves = F.frame_waves("bunny", width, height)
    assert [w.index for w in waves] == list(range(9))
    assert F.tiles(width, height) == 9

    def tile(x0, y0, w, h):
        return [y * width + x for y in range(y0, y0 + h) for x in range(x0, x0 + w)]

    assert waves[0].pixels.tolist() == tile(0, 0, 8, 4)
    assert waves[1].pixels.tolist() == tile(8, 0, 8, 4)
    assert waves[2].pixels.tolist() == tile(16, 0, 4, 4)
    assert waves[3].pixels.tolist() == tile(0, 4, 8, 4)
    assert waves[8].pixels.tolist() == tile(16, 8, 4, 1)
    every = np.concatenate([w.pixels for w in waves])
    assert sorted(every.tolist()) == list(range(width * height))
    assert all(len(w.origins) == len(w.dirs) == len(w.pixels) for w in waves)


@pytest.mark.parametrize(
    "argv, says",
    [
        (["--frame", "0x8"], "--frame: width and height"),
        (["--frame", "128"], "--frame must be WIDTHxHEIGHT"),
        (["--frame", "16x8", "--cus", "0"], "--cus must be a positive"),
        (["--frame", "16x8", "--cus", "two"], "--cus must be a positive"),
        (["--frame", "16x8", "--cus", "5"], "at most the frame's 4 waves"),
        (["--cus", "2"], "--cus goes with --frame"),
        (["--resume"], "--resume goes with --frame"),
        (["--frame", "16x8", "--rays", "64"], "--rays and --frame"),
    ],
)
def test_bad_frame_and_cus_are_one_line_exit_2(tmp_path, capsys, argv, says):
    code = cli.main(["experiment", "traversal-rtl", "--out", str(tmp_path), *argv])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("gpurtl: error: ") and says in err
    assert not list(tmp_path.iterdir())  # refused before any work


def _fake_engine(calls, stop_at=None):
    """An engine whose figures follow from the waves alone (the resume logic does not depend on
    what times the CU); it raises ``KeyboardInterrupt`` on the wave ``stop_at``."""

    def engine(waves, build, params):
        if stop_at is not None and stop_at in [w.index for w in waves]:
            raise KeyboardInterrupt
        calls.append([w.index for w in waves])
        lanes = [len(w.pixels) for w in waves]
        pixels = np.concatenate([w.pixels for w in waves]).tolist()
        return F.CuResult(
            engine="fake",
            waves=[w.index for w in waves],
            wave_cycles=[10 * n for n in lanes],
            pixels=pixels,
            ray_cycles=[p % 7 for p in pixels],
            ray_steps=[1] * len(pixels),
            ray_prim=[-1] * len(pixels),
            cycles=100 * sum(lanes),
            instructions=2 * len(waves),
            lane_instructions=2 * sum(lanes),
            mismatches=0,
            lookups={"hit": sum(lanes), "pending_hit": 0, "miss": len(waves)},
            work={"box": 8, "pairs": 1, "tri": 2, "nodes": sum(lanes)},
            utilization={"article": 1.0, "engine": 1.0, "issue": 1.0},
            busy=1,
            refused={"full": 0, "other": 0},
            node_lines=10,
        )

    return engine


def _figures(data):
    """The merged data without the run's own costs."""
    skip = {"cpu_seconds", "task_cpu_seconds", "wall_seconds", "cus_run"}
    out = {k: v for k, v in data.items() if k not in skip}
    out["per_cu"] = [
        {k: v for k, v in c.items() if k not in ("cpu_seconds", "wall_seconds")}
        for c in data["per_cu"]
    ]
    return out


def test_resume_after_an_interrupted_run_runs_only_the_missing_cus(tmp_path, monkeypatch):
    store = tmp_path / "store"
    calls = []
    run = dict(scene="bunny", build={"preset": "none"}, inline=True, engine="golden")
    # 24x4: 3 waves, one a CU; the first run stops in CU 1 (Ctrl-C)
    monkeypatch.setitem(F.ENGINES, "golden", _fake_engine(calls, stop_at=1))
    with pytest.raises(KeyboardInterrupt):
        F.run_frame(24, 4, 3, store, **run)
    assert calls == [[0]]
    kept = sorted(p.name for p in store.iterdir())
    assert len(kept) == 1 and kept[0].startswith("cu-") and kept[0].endswith(".json")
    json.loads((store / kept[0]).read_text())  # whole, not half-written

    calls.clear()
    monkeypatch.setitem(F.ENGINES, "golden", _fake_engine(calls))
    resumed = F.run_frame(24, 4, 3, store, resume=True, **run)
    assert calls == [[1], [2]]  # CU 0 came from the store
    assert resumed["cus_run"] == 2

    calls.clear()
    again = F.run_frame(24, 4, 3, store, resume=True, **run)
    assert calls == [] and again["cus_run"] == 0

    # a damaged result is run again; without --resume every CU runs
    (store / kept[0]).write_text("{")
    F.run_frame(24, 4, 3, store, resume=True, **run)
    assert calls == [[0]]
    calls.clear()
    fresh = F.run_frame(24, 4, 3, tmp_path / "other", **run)
    assert calls == [[0], [1], [2]]
    assert _figures(fresh) == _figures(resumed)
    assert fresh["cycles"] == max(100 * 32, 100 * 32, 100 * 32)
    # another CU count is another frame split: nothing of the 3-CU store is taken
    calls.clear()
    F.run_frame(24, 4, 1, store, resume=True, **run)
    assert calls == [[0, 1, 2]]


def test_merge_takes_the_slowest_cu_and_places_every_pixel(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setitem(F.ENGINES, "golden", _fake_engine(calls))
    data = F.run_frame(
        20, 9, 2, tmp_path, scene="bunny", build={"preset": "none"}, inline=True, engine="golden"
    )
    # tiles of 32 32 16 / 32 32 16 / 8 8 4 lanes; CU 0: waves 0 2 4 6 8, CU 1: 1 3 5 7
    assert data["cu_cycles"] == [100 * (32 + 16 + 32 + 8 + 4), 100 * (32 + 32 + 16 + 8)]
    assert data["cycles"] == 100 * 92
    image = np.array(data["image"])
    assert image.shape == (9, 20)
    assert (image == np.arange(180).reshape(9, 20) % 7).all()
    assert data["lookups"] == {"hit": 180, "pending_hit": 0, "miss": 9}


@pytest.mark.full
def test_a_small_frame_on_two_dask_workers_equals_one_process(tmp_path):
    from gpurtl.golden.traversal.loop import trace_wave
    from gpurtl.golden.traversal.rays import camera_rays
    from gpurtl.sim.experiments.traversal.scenes import camera

    kwargs = dict(builds=traversal_rtl.BUILDS, rtl_scene="bunny", frame="16x8", cus=2)
    kwargs.update(frame_engine="golden")
    one = F.measure(**kwargs, store=tmp_path / "one", inline=True)
    dask = F.measure(**kwargs, store=tmp_path / "dask", workers=2)
    assert _figures(dask) == _figures(one)
    workers = {c["worker_pid"] for c in _stored(tmp_path / "dask")}
    assert len(workers) == 2  # both CUs ran, each in a worker process of its own
    assert one["mismatches"] == 0 and one["rays"] == 128 and one["waves"] == 4
    assert one["cycles"] == max(one["cu_cycles"]) > 0
    assert one["engine_label"].startswith("golden RT unit")
    image = np.array(one["image"])
    assert (image > 0).all()
    # per wave, the wave's cycles are its slowest ray's
    for c in _stored(tmp_path / "one"):
        rays = np.array(c["ray_cycles"])
        assert c["wave_cycles"] == [int(rays[32 * k : 32 * k + 32].max()) for k in range(2)]
    # a pixel's closest hit is its own ray's (the pixel mapping), traced here on its own
    from gpurtl.golden.bvh import mesh as M
    from gpurtl.golden.traversal.scene import build_scene

    mesh = M.bunny()
    cam, _, _ = camera(mesh.triangles.astype(np.float64), 1, False)
    o, d, pixel = camera_rays(cam, 16, 8)
    scene = build_scene("bunny", mesh, "bvh8")
    prim = {p: q for c in _stored(tmp_path / "one") for p, q in zip(c["pixels"], c["ray_prim"])}
    for row in (0, 37, 101):
        alone = trace_wave(scene, o[row : row + 1], d[row : row + 1])
        assert prim[int(pixel[row])] == int(alone.prim[0])


def _stored(store):
    return [json.loads(p.read_text()) for p in sorted(store.iterdir())]


@pytest.mark.full
def test_a_killed_worker_loses_no_cu(tmp_path):
    import os
    import signal

    killed = []

    def kill_a_worker(result):
        if not killed:
            os.kill(result["worker_pid"], signal.SIGKILL)  # its nanny starts a new worker
            killed.append(result["worker_pid"])

    run = dict(scene="bunny", build=None, engine="golden")
    dask = F.run_frame(24, 8, 3, tmp_path / "dask", workers=2, on_cu=kill_a_worker, **run)
    assert killed
    one = F.run_frame(24, 8, 3, tmp_path / "one", inline=True, **run)
    assert _figures(dask) == _figures(one)


@pytest.mark.verilator
@pytest.mark.skipif("player" not in F.ENGINES, reason="no compiled player in this installation")
# The RDNA 4 build is a second player model (minutes of compiler time): the slow tier.
@pytest.mark.parametrize("build", ["small", pytest.param("rdna4", marks=pytest.mark.slow)])
def test_the_player_engine_equals_the_golden_rt_unit_on_a_small_frame(tmp_path, build):
    # the RTL through the compiled player against the golden RT unit (the CU model's RT unit
    # mode): every merged figure, per-pixel cycles included, the same
    kwargs = dict(builds=traversal_rtl.BUILDS, rtl_scene="bunny", frame="16x8", cus=2)
    kwargs.update(build=build, inline=True)
    player = F.measure(**kwargs, store=tmp_path / "p", frame_engine="player")
    golden = F.measure(**kwargs, store=tmp_path / "g", frame_engine="golden")
    assert player["engine_label"].startswith("RT unit RTL")
    assert player["mismatches"] == 0
    skip = {"engine", "engine_label"}
    assert {k: v for k, v in _figures(player).items() if k not in skip} == {
        k: v for k, v in _figures(golden).items() if k not in skip
    }
