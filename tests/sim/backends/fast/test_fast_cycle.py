"""Cycle-stepped blocks on the fast backend (:mod:`gpurtl.sim.backends.fast.cycle`): the
compiled cycle driver agrees with Amaranth's simulator cycle for cycle, the check passes on
``waitcnt`` (compiled stimulus and replayed Python stimulus) and ``rt_unit``, the compiled
``waitcnt`` stimulus follows the rules of the Python one, and a wrong output in the trace or a
wrong golden model makes the check fail at the right cycle."""

import numpy as np
import pytest

from gpurtl.facts.waitcnt import profile
from gpurtl.sim.backends import BACKENDS
from gpurtl.sim.backends.fast import cycle
from gpurtl.sim.core import layouts, registry
from gpurtl.sim.core.words import words_of
from gpurtl.sim.harness import golden_io
from gpurtl.sim.harness.session import MismatchError

WAITCNT = {"waves": "4"}


def _waitcnt():
    block = registry.get("waitcnt")
    return block, block.resolve(WAITCNT)


def test_config_header_names_every_field_at_its_offset():
    block, params = _waitcnt()
    header = cycle.config_header("waitcnt", block, params)
    in_layout, out_layout = block.layouts(**params)
    for prefix, layout in (("IN", in_layout), ("OUT", out_layout)):
        for leaf in layouts.leaves(layout):
            name = prefix + "_" + leaf.path.replace(".", "_").replace("[", "_").replace("]", "_")
            name = name.rstrip("_")
            assert f"Field {name} = {{{leaf.offset}, {leaf.width}}};" in header
    assert "#define STIMULUS 1" in header
    assert "static const int WAVES = 4;" in header


def test_stimulus_mode_follows_the_environment(monkeypatch):
    block, _ = _waitcnt()
    assert cycle.stimulus_mode(block) == "compiled"
    assert cycle.stimulus_mode(registry.get("rt_unit")) == "python"
    monkeypatch.setenv(cycle.STIMULUS_ENV, "python")
    assert cycle.stimulus_mode(block) == "python"
    monkeypatch.setenv(cycle.STIMULUS_ENV, "rust")
    with pytest.raises(Exception, match="must be `compiled` or `python`"):
        cycle.stimulus_mode(block)


@pytest.mark.verilator
def test_replay_equals_amaranths_simulator_cycle_for_cycle():
    block, params = _waitcnt()
    inputs = block.stimulus(np.random.default_rng(4), 400, **params)
    fast = BACKENDS["fast"].run(block, params, inputs, keep_outputs=True)
    pysim = BACKENDS["pysim"].run(block, params, inputs, keep_outputs=True)
    assert fast.cycles == 400 and len(fast.outputs) == 400
    assert fast.outputs == pysim.outputs
    expected = golden_io.golden_outputs(block, params, inputs)
    report = BACKENDS["fast"].run(block, params, inputs, expected=expected)
    assert (report.passed, report.failed) == (400, 0)


@pytest.mark.verilator
@pytest.mark.parametrize("mode", ["compiled", "python"])
def test_waitcnt_check_passes(mode, monkeypatch):
    monkeypatch.setenv(cycle.STIMULUS_ENV, mode)
    block, params = _waitcnt()
    report = BACKENDS["fast"].check(block, params, count=6000, seed=2)
    assert report.stimulus == mode
    assert (report.passed, report.failed, report.cycles) == (6000, 0, 6000)


@pytest.mark.verilator
def test_compiled_waitcnt_stimulus_follows_the_python_rules(monkeypatch, tmp_path):
    """The recorded trace: bursts (every other phase of 120 cycles) with few returns, most
    issues of a burst on its focus class, waits on 15% of the cycles, every wait form."""
    block, params = _waitcnt()
    model = cycle.model_of(block, params)
    in_path, out_path = tmp_path / "in.bin", tmp_path / "out.bin"
    count = 24000
    cycle._run(model, ["--generate", in_path, out_path, count, 7])
    in_layout, _ = block.layouts(**params)
    rows = np.fromfile(in_path, dtype="<u4").reshape(count, words_of(in_layout.size))
    values = [layouts.unpack(in_layout, int.from_bytes(r.tobytes(), "little")) for r in rows]
    burst = (np.arange(count) // 120) % 2 == 1
    prof = profile(params["generation"])
    returns = np.array([[v["ret"][n]["valid"] for n in prof.counters] for v in values])
    assert abs(returns[burst].mean() - 0.03) < 0.01
    assert abs(returns[~burst].mean() - 0.45) < 0.02
    assert abs(np.mean([v["issue"]["valid"] for v in values]) - 0.55) < 0.02
    assert abs(np.mean([v["wait"]["valid"] for v in values]) - 0.15) < 0.01
    assert {v["issue"]["wave"] for v in values} == set(range(4))
    forms = {
        next((f.name for f in prof.waits if f.matches(v["wait"]["word"])), None) for v in values
    }
    assert forms == {f.name for f in prof.waits} | {None}
    for phase in range(1, count // 120, 2):  # a burst: most issues on one class
        classes = [v["issue"]["cls"] for v in values[120 * phase : 120 * phase + 120]]
        assert np.bincount(classes).max() >= 0.6 * 120


@pytest.mark.verilator
def test_a_wrong_output_in_the_trace_fails_at_its_cycle(monkeypatch):
    block, params = _waitcnt()
    run = cycle._run

    def corrupt(model, arguments):
        summary = run(model, arguments)
        out = np.memmap(arguments[2], dtype="<u4", mode="r+")
        words = words_of(block.layouts(**params)[1].size)
        out[37 * words] ^= 1  # bit 0 of cycle 37's outputs: `stall` of wave 0
        out.flush()
        return summary

    monkeypatch.setattr(cycle, "_run", corrupt)
    report = BACKENDS["fast"].check(block, params, count=500, seed=1)
    assert (report.passed, report.failed) == (499, 1)
    assert report.first.where == "cycle 37"
    assert report.first.field == "stall"


@pytest.mark.verilator
def test_a_wrong_golden_model_fails(monkeypatch):
    block, params = _waitcnt()
    rows = golden_io.GoldenModel.rows

    def wrong(self, words):
        got = rows(self, words).copy()
        got[100, 0] ^= 1  # `stall` of wave 0 in cycle 100
        return got

    monkeypatch.setattr(golden_io.GoldenModel, "rows", wrong)
    report = BACKENDS["fast"].check(block, params, count=300, seed=1)
    assert report.failed == 1
    assert (report.first.where, report.first.field) == ("cycle 100", "stall")


@pytest.mark.verilator
def test_rt_unit_check_passes_on_the_small_build():
    block = registry.get("rt_unit")
    params = block.resolve({k: str(v) for k, v in block.small.items()})
    report = BACKENDS["fast-behavioural"].check(block, params, count=300, seed=3)
    assert (report.passed, report.failed, report.cycles) == (300, 0, 300)


@pytest.mark.verilator
def test_cycle_session_agrees_with_amaranths_simulator(monkeypatch):
    block, params = _waitcnt()
    inputs = block.stimulus(np.random.default_rng(5), 600, **params)
    with BACKENDS["fast"].session(block, params, golden=True, strict=True) as session:
        got = [session.apply(value) for value in inputs[:100]] + session.apply_all(inputs[100:])
        assert (session.report.passed, session.report.failed, session.cycle) == (600, 0, 600)
    with BACKENDS["pysim"].session(block, params, golden=False) as session:
        assert session.apply_all(inputs) == got
    outputs = golden_io.GoldenModel.outputs

    def wrong(self, values):
        result = outputs(self, values)
        if len(values) == 7:  # the second call below: its last cycle
            result[-1] = {**result[-1], "stall": result[-1]["stall"] ^ 1}
        return result

    monkeypatch.setattr(golden_io.GoldenModel, "outputs", wrong)
    with BACKENDS["fast"].session(block, params, golden=True, strict=True) as session:
        session.apply_all(inputs[:10])
        with pytest.raises(MismatchError, match="cycle 16: field `stall`"):
            session.apply_all(inputs[10:17])
