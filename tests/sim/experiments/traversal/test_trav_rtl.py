"""The traversal loop on the RTL (``gpurtl experiment traversal --rtl``): every intersect through
the ``rt_unit`` RTL and every stack instruction through ``ds_bvh_stack``, checked against the
golden models and the golden traversal, timed against the CU model."""

import pytest

from gpurtl.golden.bvh import mesh as M
from gpurtl.golden.memory import Level
from gpurtl.golden.traversal.loop import trace_wave
from gpurtl.golden.traversal.rays import sphere_rays as make_rays
from gpurtl.golden.traversal.scene import build_scene
from gpurtl.sim.core import layouts
from gpurtl.sim.experiments.traversal import rtl as R


@pytest.fixture(scope="module")
def bunny():
    mesh = M.bunny()
    return mesh, build_scene("bunny", mesh, "bvh8")


def _short(rt):
    """The shader side and the levels below L0 with short timings (fewer idle cycles to
    simulate; the rules are the same)."""
    levels = [Level("L1", 64 * 1024, 4, 3, 1.0, 16), Level("DRAM", 0, 1, 5, 1.0, 0)]
    l0 = Level("L0", rt["size"], rt["ways"], 1, 1.0, rt["mshrs"])
    return R.cu_params(
        rt,
        setup_cycles=2,
        box_valu=1,
        pair_valu=2,
        instance_valu=1,
        shade_valu=1,
        lds_latency=3,
        levels=[l0] + levels,
    )


def _run(bunny, rays, backend, params=None, rt=None, hook=None, progress=None):
    mesh, scene = bunny
    origins, directions = make_rays(mesh, rays, seed=3)
    rt = rt or R.rt_unit_params()
    result = R.run_loop(
        scene,
        origins,
        directions,
        backend=backend,
        rt=rt,
        params=params,
        hook=hook,
        progress=progress,
    )
    golden = [
        trace_wave(scene, origins[k : k + 32], directions[k : k + 32]) for k in range(0, rays, 32)
    ]
    return result, golden


def _assert_loop(result, golden):
    check = R.check_against(result["traces"], golden)
    assert check["differ"] == 0, check
    steps, stack_ops = check["steps"][1], check["stack_ops"][1]
    assert check["hits"] > 0
    # every instruction went through the RTL, with no mismatch
    assert result["accel_results"] == steps
    assert result["sessions"]["rt_unit"][1] == 0
    assert result["sessions"]["ds_bvh_stack"] == [stack_ops, 0, stack_ops]
    assert sum(result["lookups"].values()) == steps
    kinds = [kind for _, kind, _, _ in result["records"]]
    assert kinds.count("bvh") == kinds.count("ds") == sum(len(t.active) for t in golden)
    cmp = R.compare(result)
    assert cmp["model_instructions"] == cmp["instructions"] == len(kinds)
    # the CU model's RT unit mode (the golden RT unit's timing) agrees cycle for cycle
    for kind in ("bvh", "ds"):
        exact = cmp["exact_completion"][kind]
        assert exact["equal"] == exact["count"] == kinds.count(kind), exact
        assert exact["issue"]["max_abs"] == 0
    assert cmp["exact"]["cycles"] == cmp["rtl"]["cycles"] == result["cycles"]
    assert cmp["exact"]["lookups"] == cmp["rtl"]["lookups"] == result["lookups"]
    # the formula mode sees the same L0 accesses (it classifies them its own way)
    assert sum(cmp["model"]["lookups"].values()) == steps
    return cmp


@pytest.mark.full
def test_rtl_loop_on_pysim(bunny, monkeypatch):
    monkeypatch.setattr(R, "PROGRESS_CYCLES", 50)
    rt = R.rt_unit_params()
    lines = []
    result, golden = _run(bunny, 2, "pysim", params=_short(rt), rt=rt, progress=lines.append)
    _assert_loop(result, golden)
    # progress while it runs: once the sessions are open, then every PROGRESS_CYCLES cycles
    assert lines[0].startswith("RTL sessions open after") and lines[0].endswith("simulating")
    ticks = [line for line in lines[1:] if line.startswith("cycle ")]
    assert ticks == lines[1:] and len(ticks) > 0
    assert abs(len(ticks) - result["cycles"] // 50) <= 1
    # the RT unit is busy (some bvhcnt > 0) at most every cycle, at least II per result
    assert result["accel_results"] * result["accel_ii"] <= result["busy"] <= result["cycles"]


def test_a_corrupted_rtl_result_is_caught(bunny):
    """A wrong node result from the RTL (one bit of the first result's first DWORD) stops the
    loop with the session's mismatch; a box-only accelerator build keeps the test quick (the
    first node is the root box)."""
    rt = R.rt_unit_params({"triangles": False})

    def hook(session):
        run = session._run_cycles
        flipped = []

        def corrupt(bits):
            got = run(bits)
            for k, value in enumerate(got):
                out = layouts.unpack(session.out_layout, value)
                if out["out"]["valid"] and not flipped:
                    out["out"]["payload"]["result"]["dw"][0] ^= 1
                    got[k] = layouts.pack(session.out_layout, out)
                    flipped.append(k)
            return got

        session._run_cycles = corrupt

    with pytest.raises(R.RtlLoopError, match="differs from the golden model"):
        _run(bunny, 1, "pysim", params=_short(rt), rt=rt, hook=hook)


#: Builds that differ from the default in the L0's size, ways, misses in flight, merged requests,
#: ray buffer slots, replacement and fill beats.
_BUILDS = [
    {"size": 512, "ways": 2, "mshrs": 1, "replacement": "plru", "beats": 4},
    {"size": 8192, "ways": 8, "mshrs": 8, "targets": 2, "id_bits": 3},
]


@pytest.mark.slow
@pytest.mark.parametrize("changes", _BUILDS, ids=["small-plru-beats4", "large-8way"])
def test_rtl_loop_other_builds_on_pysim(bunny, changes):
    """``--rtl-param`` builds: the RTL and the CU model's RT unit mode, fed the same build,
    agree cycle for cycle (every instruction's issue and completion, the cycle count, the L0
    lookups). Each build elaborates the accelerator again (about 30 s on the Amaranth
    simulator), so the tier is ``slow``."""
    rt = R.rt_unit_params(R.build_changes([f"{k}={v}" for k, v in changes.items()]))
    result, golden = _run(bunny, 4, "pysim", params=_short(rt), rt=rt)
    cmp = _assert_loop(result, golden)
    assert result["rt"] == rt
    assert cmp["rtl"]["lookups"]["miss"] > 0


def test_rtl_param_reaches_the_build_and_the_report(tmp_path, monkeypatch):
    """``--rtl-param`` texts become the ``rt_unit`` build of the run (registry-typed values),
    and the report names the build and what the formulas do not model."""
    changes = R.build_changes(["size=0x200", "replacement=plru", "ftz=on"])
    assert changes == {"size": 512, "replacement": "plru", "ftz": True}
    rt = R.rt_unit_params(changes)
    assert rt["ways"] == R.RT_UNIT["ways"] and rt["size"] == 512
    # the CU model's formulas take the L0 level's size, ways and misses in flight
    l0 = R.cu_params(rt).levels[0]
    assert (l0.size, l0.ways, l0.mshrs) == (512, rt["ways"], rt["mshrs"])
    lines = R._build_lines({"rt_unit": rt, "changes": changes, "accel": {"ii": 8, "latency": 23}})
    text = " ".join(lines)
    assert "--rtl-param size=512 --rtl-param replacement=plru --rtl-param ftz=True" in text
    assert "L0 512 B, 4 ways, plru replacement" in text
    assert "formulas do not model replacement=plru" in text


@pytest.mark.verilator
def test_rtl_loop_on_verilator(bunny):
    """Two waves of 32 rays at the default (RDNA 4) timings."""
    result, golden = _run(bunny, 64, "verilator")
    cmp = _assert_loop(result, golden)
    assert cmp["rtl"]["cycles"] == result["cycles"]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["obb", "--rtl"], "--rtl is an option of experiment `traversal`, not `obb`"),
        (["traversal", "--rtl-rays", "3"], "--rtl-rays is an option of --rtl: give --rtl too"),
        (["traversal", "--rtl", "--rtl-rays", "0"], "must be a positive integer, not '0'"),
        (["traversal", "--rtl", "--rtl-backend", "fastest"], "invalid choice: 'fastest'"),
        (["traversal", "--rtl", "--rtl-scale", "10"], "--rtl-scale and --rtl are two different"),
        (
            ["traversal", "--rtl", "--rtl-modes", "--rtl-backend", "player"],
            "BVH4x2, which the player does not play",
        ),
        (["traversal", "--rtl-param", "size=512"], "--rtl-param is an option of --rtl"),
        (["traversal", "--rtl", "--rtl-param", "size"], "--rtl-param must be written NAME=VALUE"),
        (
            ["traversal", "--rtl", "--rtl-param", "ways=3"],
            "--rtl-param: parameter `ways` must be one of 1, 2, 4, 8, 16, not 3",
        ),
        (
            ["traversal", "--rtl", "--rtl-param", "l0_size=512"],
            "--rtl-param: block `rt_unit` has no parameter `l0_size`",
        ),
        (
            ["traversal", "--rtl", "--rtl-param", "size=1000"],
            "`size` must be a positive multiple of 128 x ways, not 1000",
        ),
        (
            ["traversal", "--rtl", "--rtl-param", "triangles=off"],
            "`triangles` must be True for the loop",
        ),
        (
            ["traversal", "--rtl", "--rtl-param", "line_bits=8"],
            "`line_bits` must be at least 9 for the bunny's node lines, not 8",
        ),
    ],
)
def test_rtl_options_refused(argv, message, tmp_path, capsys):
    from gpurtl.sim.tools import cli

    try:
        status = cli.main(["experiment", *argv, "--out", str(tmp_path)])
    except SystemExit as exit_:  # argparse's own refusals
        status = exit_.code
    assert status == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "traversal").exists()


def test_a_failed_rtl_run_is_one_line_and_exit_1(tmp_path, capsys, monkeypatch):
    from gpurtl.sim.tools import cli

    def fail(**kwargs):
        raise R.RtlLoopError("RTL output differs from the golden model: cycle 7")

    monkeypatch.setattr(R, "measure", fail)
    status = cli.main(["experiment", "traversal", "--rtl", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert status == 1
    assert "gpurtl: error: experiment `traversal`: RTL output differs" in err
    assert "Traceback" not in err
    assert not (tmp_path / "traversal").exists()


@pytest.mark.verilator
def test_rtl_loop_on_the_player(tmp_path):
    """``--rtl-backend player``: the waves' programs on the compiled player, every instruction
    through the RTL, the session loop's timing (``test_player.py`` pins its figures), the report
    written with the RT unit mode left out."""
    data = R.measure(rtl_backend="player", rtl_rays=64)
    check = data["check"]
    assert check["differ"] == 0
    assert check["steps"] == [664, 664] and check["stack_ops"] == [664, 664]
    assert data["comparison"]["rtl"]["cycles"] == 20546
    assert data["comparison"]["exact"] is None
    assert data["sessions"]["player"]["mismatches"] == 0
    R.report(data, tmp_path)
    text = (tmp_path / "summary.md").read_text()
    assert "| cycles | 20546 | not run |" in text
