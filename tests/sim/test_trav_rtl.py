"""The traversal loop on the RTL (``gpurtl experiment traversal --rtl``): every intersect through
the ``rt_unit`` RTL and every stack instruction through ``ds_bvh_stack``, checked against the
golden models and the golden traversal, timed against the CU model."""

import pytest

from gpurtl.golden.bvh import mesh as M
from gpurtl.golden.memory import Level
from gpurtl.sim.core import layouts
from gpurtl.sim.experiments import _trav_rtl as R
from gpurtl.sim.experiments._trav_loop import trace_wave
from gpurtl.sim.experiments._trav_scalar import build_scene
from gpurtl.sim.experiments.obb import make_rays


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


def _run(bunny, rays, backend, params=None, rt=None, hook=None):
    mesh, scene = bunny
    origins, directions = make_rays(mesh, rays, seed=3)
    rt = rt or R.rt_unit_params()
    result = R.run_loop(
        scene, origins, directions, backend=backend, rt=rt, params=params, hook=hook
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


def test_rtl_loop_on_pysim(bunny):
    rt = R.rt_unit_params()
    result, golden = _run(bunny, 2, "pysim", params=_short(rt), rt=rt)
    _assert_loop(result, golden)
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
        (["traversal", "--rtl", "--rtl-backend", "fast"], "invalid choice: 'fast'"),
        (["traversal", "--rtl", "--rtl-scale", "10"], "--rtl-scale and --rtl are two different"),
    ],
)
def test_rtl_options_refused(argv, message, tmp_path, capsys):
    from gpurtl.sim import cli

    try:
        status = cli.main(["experiment", *argv, "--out", str(tmp_path)])
    except SystemExit as exit_:  # argparse's own refusals
        status = exit_.code
    assert status == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "traversal").exists()


def test_a_failed_rtl_run_is_one_line_and_exit_1(tmp_path, capsys, monkeypatch):
    from gpurtl.sim import cli

    def fail(**kwargs):
        raise R.RtlLoopError("RTL output differs from the golden model: cycle 7")

    monkeypatch.setattr(R, "measure", fail)
    status = cli.main(["experiment", "traversal", "--rtl", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert status == 1
    assert "gpurtl: error: experiment `traversal`: RTL output differs" in err
    assert "Traceback" not in err
    assert not (tmp_path / "traversal").exists()
