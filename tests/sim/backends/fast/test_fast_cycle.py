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
from gpurtl.sim.core.words import columns_from_words, words_from_dicts, words_of
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
    assert cycle.stimulus_mode(registry.get("rt_unit")) == "compiled"
    assert cycle.stimulus_mode(registry.get("l0_cache")) == "python"
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


def _rt_unit():
    block = registry.get("rt_unit")
    return block, block.resolve({k: str(v) for k, v in block.small.items()})


@pytest.mark.verilator
@pytest.mark.parametrize("mode", ["compiled", "python"])
def test_rt_unit_check_passes_on_the_small_build(mode, monkeypatch):
    monkeypatch.setenv(cycle.STIMULUS_ENV, mode)
    block, params = _rt_unit()
    count = 3000 if mode == "compiled" else 300
    report = BACKENDS["fast-behavioural"].check(block, params, count=count, seed=3)
    assert report.stimulus == mode
    assert (report.passed, report.failed, report.cycles) == (count, 0, count)


def _rt_unit_rates(in_columns, out_columns):
    """What a trace of ``rt_unit`` does, as rates per cycle (or per lane taken)."""
    take = (in_columns["inst.valid"] & out_columns["inst.ready"]).astype(bool)
    kind = in_columns["inst.payload.node_ptr[0]"] & 0xF
    results = out_columns["out.valid"].astype(bool) & in_columns["out.ready"].astype(bool)
    events = out_columns["event.kind"][out_columns["event.valid"].astype(bool)]
    return {
        "lanes": take.mean(),
        "last": in_columns["inst.payload.last"][take].mean(),
        "dual": in_columns["inst.payload.dual"][take].mean(),
        "box": (kind[take] == 5).mean(),
        "results": results.mean(),
        "status ok": (out_columns["out.payload.result.status"][results] == 0).mean(),
        "requests": out_columns["mem_req.valid"].mean(),
        "fills": in_columns["fill.valid"].mean(),
        "hits": (events == 0).mean(),
        "waits": in_columns["wait.valid"].mean(),
    }


@pytest.mark.verilator
def test_compiled_rt_unit_stimulus_follows_the_python_rules(tmp_path):
    """The recorded trace of the compiled stimulus and the Python stimulus's trace (its golden
    outputs) on the same build do the same things at about the same rates: lanes taken, wave
    instructions' last lanes, dual forms, box nodes, results (mostly status 0: the nodes hold
    boxes along the instructions' rays), memory requests, fills, L0 hits, waits."""
    block, params = _rt_unit()
    in_layout, out_layout = block.layouts(**params)
    model = cycle.model_of(block, params, fp_cores="behavioural")
    count = 20000
    in_path, out_path = tmp_path / "in.bin", tmp_path / "out.bin"
    image = cycle.stimulus_data(block, params, 5, tmp_path / "image.bin")
    cycle._run(model, ["--generate", in_path, out_path, count, 5, *image])
    rows_in = np.fromfile(in_path, dtype="<u4").reshape(count, -1)
    rows_out = np.fromfile(out_path, dtype="<u4").reshape(count, -1)
    compiled = _rt_unit_rates(
        columns_from_words(in_layout, rows_in), columns_from_words(out_layout, rows_out)
    )
    values = block.stimulus(np.random.default_rng(5), 4000, **params)
    python_in = words_from_dicts(in_layout, values)
    python_out = words_from_dicts(out_layout, golden_io.golden_outputs(block, params, values))
    python = _rt_unit_rates(
        columns_from_words(in_layout, python_in), columns_from_words(out_layout, python_out)
    )
    for name, rate in python.items():
        assert abs(compiled[name] - rate) < max(0.05, 0.25 * rate), (name, compiled, python)
    assert compiled["status ok"] > 0.5 and compiled["hits"] > 0.2 and compiled["dual"] > 0
    stalled = columns_from_words(out_layout, rows_out)["bvh.stall"]  # waits hold waves (noisy)
    assert 0.1 < np.mean(stalled != 0) < 1


@pytest.mark.verilator
def test_a_wrong_rt_unit_result_in_the_trace_fails_at_its_cycle(monkeypatch):
    """The batch check of ``rt_unit`` reads every result: one bit of one result is found."""
    block, params = _rt_unit()
    _, out_layout = block.layouts(**params)
    run = cycle._run
    where = {}

    def corrupt(model, arguments):
        summary = run(model, arguments)
        out = np.memmap(arguments[2], dtype="<u4", mode="r+").reshape(int(arguments[3]), -1)
        valid = columns_from_words(out_layout, np.asarray(out))["out.valid"]
        where["cycle"] = int(np.flatnonzero(valid)[5])
        offset = next(
            leaf.offset
            for leaf in layouts.leaves(out_layout)
            if leaf.path == "out.payload.result.dw[3]"
        )
        out[where["cycle"], offset // 32] ^= 1 << (offset % 32)
        out.flush()
        return summary

    monkeypatch.setattr(cycle, "_run", corrupt)
    report = BACKENDS["fast-behavioural"].check(block, params, count=500, seed=1)
    assert report.stimulus == "compiled"
    assert (report.passed, report.failed) == (499, 1)
    assert report.first.where == f"cycle {where['cycle']}"
    assert report.first.field == "out.payload.result.dw[3]"


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
