"""``gpurtl experiment traversal-rtl`` (sim/experiments/traversal/traversal_rtl.py): the
interface's keys in ``data.json``, the builds, the rays, the engine that can be replaced; and
(slow) a real run on the Amaranth simulator with 0 mismatches."""

import json
from importlib import metadata

import pytest

from gpurtl.sim.core import registry
from gpurtl.sim.experiments.traversal import traversal_rtl as TR
from gpurtl.sim.tools.cli import main

KEYS = {"rays", "instructions", "mismatches", "cycles", "cpu_seconds", "build"}


@pytest.mark.full  # about 16 s of the golden loop: the full tier (CI) runs it
def test_data_json_has_the_interfaces_keys(tmp_path, capsys, monkeypatch):
    """Through the command line with an engine that answers from the golden loop alone (the
    experiment's bookkeeping, not the RTL: the slow test below runs the RTL)."""
    from gpurtl.golden.traversal.loop import trace_wave

    seen = {}

    def engine(scene, origins, directions, rt, backend, progress):
        seen.update(rt=rt, backend=backend, rays=len(origins), scene=scene.name)
        traces = [trace_wave(scene, origins[k : k + 32], directions[k : k + 32]) for k in (0, 32)]
        steps = sum(int(t.counts["steps"].sum()) for t in traces)
        return {"instructions": 2 * steps, "mismatches": 0, "cycles": 1234}

    monkeypatch.setitem(TR.ENGINES, TR.ENGINE, engine)
    code = main(["experiment", "traversal-rtl", "--rays", "40", "--build", "rdna4",
                 "--out", str(tmp_path)])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    data = json.loads((tmp_path / "traversal-rtl" / "data.json").read_text())
    assert KEYS <= set(data)
    assert data["rays"] == 40 == seen["rays"] and data["build"] == "rdna4"
    assert seen["rt"] == registry.get("rt_unit").resolve({"preset": "rdna4"})
    assert seen["backend"] == "verilator" and seen["scene"] == "terrain"
    assert data["scene"]["triangles"] >= 50_000
    assert data["instructions"] > 0 and data["cycles"] == 1234 and data["cpu_seconds"] > 0
    prov = data["provenance"]
    assert prov["gpurtl"] == metadata.version("gpurtl") and prov["commit"]
    assert prov["seeds"] == TR.SEEDS == {} and prov["tools"]["verilator"]
    assert prov["command"].startswith("gpurtl experiment traversal-rtl --rays 40")
    assert "## Provenance" in (tmp_path / "traversal-rtl" / "summary.md").read_text()


class _ReferencePlayer:
    """``run_player`` of the wave programs on the golden RT unit (the programs' own
    :class:`gpurtl.golden.traversal.program.ProgramSource` in the CU model's RT unit mode): the
    player engine's bookkeeping, not the RTL."""

    class PlayerError(RuntimeError):
        pass

    def __init__(self, corrupt=False):
        self.corrupt, self.seen = corrupt, {}

    def run_player(self, programs, rt, params, *, log=None):
        from types import SimpleNamespace

        from gpurtl.golden.cu.rt_unit import HierarchyPort, run
        from gpurtl.golden.traversal.program import ProgramSource
        from gpurtl.hdl.rt_unit import fetch_layout
        from gpurtl.sim.blocks.rt_unit import top_golden
        from gpurtl.sim.core import layouts

        self.seen.update(programs=programs, rt=rt)
        if self.corrupt:
            programs.result_dw[3, 1] ^= 1
        idle = layouts.unpack(fetch_layout(rt["tag_bits"]), 0)
        lines = {
            int(n): sum(int(w) << (32 * k) for k, w in enumerate(row))
            for n, row in zip(programs.lines, programs.line_words)
        }
        memory = HierarchyPort(params.levels[1:], make_line=lines.get, warm=list(lines))
        sources = [ProgramSource(programs, w) for w in range(programs.waves)]
        try:
            out = run(sources, params, top_golden(**rt), memory, slots=1 << rt["tag_bits"],
                      idle=idle)  # fmt: skip
        except ValueError as error:
            return SimpleNamespace(
                instructions=[], cycles=0, results=0, stack_checked=0, mismatches=1,
                first_mismatches=[str(error)], cpu_seconds=1.0, sim_seconds=1.0,
                build_seconds=0.0, lookups={}, refused={}, busy=0, in_flight={}, memory={},
            )  # fmt: skip
        return SimpleNamespace(
            instructions=out.instructions, cycles=out.cycles, results=out.results,
            stack_checked=programs.entries, mismatches=0, first_mismatches=[],
            cpu_seconds=1.0, sim_seconds=1.0, build_seconds=0.0, lookups=out.lookups,
            refused=out.refused, busy=out.busy, in_flight={}, memory={},
        )  # fmt: skip


@pytest.mark.full  # about 5 s: the golden RT unit a cycle at a time
@pytest.mark.parametrize("corrupt", [False, True])
def test_the_player_engine_counts_and_checks(monkeypatch, tmp_path, corrupt):
    import sys

    from gpurtl.sim.experiments.traversal.rtl import RtlLoopError

    fake = _ReferencePlayer(corrupt)
    monkeypatch.setitem(sys.modules, "gpurtl.sim.backends.fast.player", fake)
    import gpurtl.sim.backends.fast as fast

    monkeypatch.setattr(fast, "player", fake, raising=False)
    if corrupt:
        with pytest.raises(RtlLoopError, match="RTL outputs or counts differ"):
            TR.measure(rays=12, rtl_scene="bunny", engine="player")
        return
    data = TR.measure(rays=12, rtl_scene="bunny")
    programs = fake.seen["programs"]
    assert data["engine"] == "player" and data["mismatches"] == 0
    assert data["instructions"] == 2 * programs.iterations > 0
    assert data["lane_instructions"] == 2 * programs.entries
    assert data["check"]["counts"]["results"] == [programs.entries] * 2
    assert data["cycles"] > 0 and data["program_cpu_seconds"] > 0
    formulas = data["formulas"]  # the golden RT unit here: its own timing, not the formulas'
    assert formulas["cycles"]["rtl"] == data["cycles"] and formulas["cycles"]["formulas"] > 0
    assert formulas["bvh"]["completion"]["count"] == programs.iterations
    assert formulas["wave"]["span"]["count"] == programs.waves
    TR.report(data, tmp_path)
    text = (tmp_path / "summary.md").read_text()
    assert "| wave: span (first issue to last completion) | 1 |" in text


@pytest.mark.parametrize(
    "argv, message",
    [
        (("--rays", "x"), "--rays must be a positive number of rays, not 'x'"),
        (("--rays", "0"), "--rays must be a positive number of rays, not '0'"),
        (("--build", "big"), "invalid choice: 'big'"),
        (("--mode", "bvh4x2", "--frame", "16x8"), "--mode goes with the --rays run"),
        (("--rtl-param", "size=100"), "--rtl-param: "),
    ],
)
def test_mistakes_exit_2(tmp_path, capsys, argv, message):
    with pytest.raises(SystemExit) if argv[0] == "--build" else _nothing():
        code = main(["experiment", "traversal-rtl", *argv, "--out", str(tmp_path)])
        assert code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@pytest.mark.slow
def test_a_small_run_on_the_rtl_has_no_mismatch():
    """Two rays of the packaged bunny through the small build's RTL on pysim."""
    data = TR.measure(rays=2, rtl_scene="bunny", simulator="pysim", engine="session")
    assert data["mismatches"] == 0 and data["instructions"] > 2 and data["cycles"] > 0
    assert data["check"]["hits"] > 0  # the middle of the image: rays that meet the bunny
    assert data["sessions"]["rt_unit"][1] == 0 and data["check"]["differ"] == 0


def test_the_demo_leaves_it_out(tmp_path, monkeypatch):
    """``gpurtl demo`` runs every experiment but this one (its quick run builds the RTL)."""
    from gpurtl.sim import experiments
    from gpurtl.sim.backends import BACKENDS
    from gpurtl.sim.tools import demo

    ran = []
    monkeypatch.setattr(demo, "run_experiment", lambda m, out, quick: ran.append(m.NAME) or {})
    monkeypatch.setattr(demo, "print_result", lambda *a: None)
    monkeypatch.setattr(demo, "_waveforms", lambda *a: [])
    monkeypatch.setattr(demo, "_summary", lambda *a: "")
    monkeypatch.setattr(BACKENDS["pysim"], "check", None)
    (tmp_path / "demo").mkdir()
    demo.demo(tmp_path / "demo", quick=True)
    out = {"traversal-rtl", "traversal-rtl-sensitivity"}
    assert not out & set(ran) and "traversal" in ran
    assert set(ran) == set(experiments.experiments()) - out
