"""Every backend through the same check and session API: a small pipeline block (``fp32_add``)
and a small cycle-stepped block (``waitcnt``), with golden checking on and off, a wrong golden
model caught, the initiation interval asserted (a build that declares the wrong one is caught),
and a loop whose inputs depend on the RTL's outputs.

The fast backends run both kinds (a cycle-stepped block under the compiled cycle driver, its
sessions over the driver's session mode). The parts on a compiled model
(Verilator, Icarus Verilog) are marked ``verilator``; the Icarus ones skip without ``iverilog``.
"""

import shutil

import numpy as np
import pytest

from gpurtl.sim.backends import BACKENDS
from gpurtl.sim.core import registry
from gpurtl.sim.core.export import ToolchainError
from gpurtl.sim.harness.engine import DONE, StallPattern
from gpurtl.sim.harness.golden_io import golden_outputs
from gpurtl.sim.harness.session import MismatchError

GPU = {"gpu", "gpu-behavioural"}
COMPILED = {name for name, backend in BACKENDS.items() if backend.tools} | GPU


def _no_cuda():
    """Why the gpu backend cannot run here (no CuPy, no CUDA device), or ``None``."""
    try:
        BACKENDS["gpu"].require_tools()
    except ToolchainError as error:
        return str(error)
    return None


def _marks(name):
    """Backends that compile a model run in the ``verilator`` tier; Icarus Verilog is a system
    package (not on PyPI), so its cases skip, with the reason shown, where it is not installed."""
    marks = [pytest.mark.verilator] if name in COMPILED else []
    if name in GPU:
        reason = _no_cuda()
        marks.append(pytest.mark.skipif(reason is not None, reason=reason or ""))
    if name == "icarus":
        marks.append(
            pytest.mark.skipif(
                shutil.which("iverilog") is None or shutil.which("vvp") is None,
                reason="Icarus Verilog is not installed (apt-get install iverilog)",
            )
        )
    return marks


def backend_params():
    return [pytest.param(name, marks=_marks(name)) for name in BACKENDS]


def session_backend_params():
    """The backends that open sessions (a batch-only one refuses: see
    ``test_a_batch_only_backend_refuses_a_session``)."""
    return [
        pytest.param(name, marks=_marks(name))
        for name, backend in BACKENDS.items()
        if backend.sessions
    ]


def wrong_golden(block, field):
    """``block`` whose golden model flips bit 0 of output ``field`` of every output."""

    def golden(**params):
        model = block.golden(**params)
        step = model.step if block.kind == "cycle" else model

        class Wrong:
            def __call__(self, tx):
                out = dict(step(tx))
                out[field] ^= 1
                return out

            step = __call__

        return Wrong()

    return block.__class__(**{**block.__dict__, "golden": golden})


def declared_ii(block, ii):
    """``block`` whose build declares ``initiation_interval = ii`` (the RTL is unchanged)."""

    def build(**params):
        dut = block.build(**params)
        dut.initiation_interval = ii
        return dut

    return block.__class__(**{**block.__dict__, "build": build})


PIPELINE = "fp32_add"
CYCLE = "waitcnt"


def stimulus(block, params, count, seed=3):
    return block.stimulus(np.random.default_rng(seed), count, **params)


@pytest.mark.parametrize("name", backend_params())
def test_check_passes_on_a_pipeline(name):
    block = registry.get(PIPELINE)
    report = BACKENDS[name].check(block, block.resolve(), count=300, seed=2)
    assert (report.passed, report.failed) == (300, 0), report.first
    assert report.cycles > 300


@pytest.mark.parametrize("name", session_backend_params())
def test_pipeline_session_in_waves_matches_the_golden_model(name):
    block = registry.get(PIPELINE)
    params = block.resolve()
    txs = stimulus(block, params, 200)
    stalls = StallPattern(seed=4, p_valid=0.7, p_ready=0.7)
    with BACKENDS[name].session(block, params, golden=True, stalls=stalls) as session:
        session.send(txs[:32])  # one wave's lanes
        first = session.receive(32)
        session.send(txs[32:])
        session.step(3)
        rest = session.receive()
        assert session.in_flight == 0
        assert (session.report.passed, session.report.failed) == (200, 0), session.report.first
        cycles = session.cycle
    assert first + rest == golden_outputs(block, params, txs)
    assert cycles >= 200


@pytest.mark.parametrize("name", session_backend_params())
def test_pipeline_session_reports_and_raises_a_mismatch(name):
    block = wrong_golden(registry.get(PIPELINE), "z")
    params = block.resolve()
    txs = stimulus(block, params, 20)
    with BACKENDS[name].session(block, params, golden=True) as session:
        session.send(txs)
        session.receive()
        assert session.report.failed == 20
        assert session.report.first.field.startswith("z")
        assert "transaction 0 (accepted cycle" in session.report.first.where
    with BACKENDS[name].session(block, params, golden=True, strict=True) as session:
        session.send(txs[:4])
        with pytest.raises(MismatchError, match="transaction 0"):
            session.receive()
    with BACKENDS[name].session(block, params, golden=False) as session:
        session.send(txs)
        assert len(session.receive()) == 20 and session.report.failed == 0


@pytest.mark.parametrize("name", session_backend_params())
def test_session_asserts_the_initiation_interval(name):
    """Back-to-back transactions of ``fp32_add`` are accepted one per cycle, as it declares; a
    build that declares two cycles fails on every transaction that waited for the one before
    (not on the first of a batch sent after the pipeline drained)."""
    block = registry.get(PIPELINE)
    params = block.resolve()
    txs = stimulus(block, params, 24)
    for declared, errors in ((None, 0), (2, 22)):
        checked = block if declared is None else declared_ii(block, declared)
        with BACKENDS[name].session(checked, params, golden=True) as session:
            session.send(txs[:12])
            session.receive()
            session.send(txs[12:])
            session.receive()
            report = session.report
        assert report.ii_errors == errors and report.latency_errors == 0
        assert report.failed == errors
        if errors:
            assert report.first.field == "(initiation interval)"
            assert report.first.expected == "accepted 2 cycles after the transaction before"
            assert report.first.got == "1 cycles"


def test_check_asserts_the_initiation_interval():
    """The random check's stall-free start catches the wrong declaration too (pysim builds the
    block in this process; the compiled backends' checks read the build by its name)."""
    block = declared_ii(registry.get(PIPELINE), 2)
    report = BACKENDS["pysim"].check(block, block.resolve(), count=100, seed=1)
    assert report.ii_errors == 9 and report.first.field == "(initiation interval)"


class Chain:
    """A source whose next operand is the previous result: each transaction waits for the RTL's
    output of the one before (the kind of loop a traversal runs)."""

    def __init__(self, count):
        self.count, self.sent, self.results = count, 0, []
        self.waiting = False

    def next(self, cycle):
        if self.sent == self.count:
            return DONE
        if self.waiting:
            return None
        a = self.results[-1]["z"] if self.results else 0x3F800000  # 1.0
        self.sent += 1
        self.waiting = True
        return {"a": a, "b": 0x3F800000, "sub": 0}  # add 1.0

    def output(self, event):
        self.results.append(event.value)
        self.waiting = False


@pytest.mark.parametrize("name", session_backend_params())
def test_a_source_driven_by_the_outputs(name):
    block = registry.get(PIPELINE)
    params = block.resolve()
    chain = Chain(6)
    with BACKENDS[name].session(block, params, golden=True) as session:
        report = session.drive(chain)
    assert report.failed == 0, report.first
    assert [r["z"] for r in chain.results] == [
        0x40000000,  # 2.0
        0x40400000,
        0x40800000,
        0x40A00000,
        0x40C00000,
        0x40E00000,  # 7.0
    ]


def cycle_backend_params():
    return [
        pytest.param(name, marks=_marks(name))
        for name, backend in BACKENDS.items()
        if "cycle" in backend.kinds
    ]


@pytest.mark.parametrize("name", cycle_backend_params())
def test_cycle_block_check_and_session(name):
    block = registry.get(CYCLE)
    params = block.small_params()
    report = BACKENDS[name].check(block, params, count=400, seed=6)
    assert (report.passed, report.failed) == (400, 0), report.first
    cycles = stimulus(block, params, 60)
    with BACKENDS[name].session(block, params, golden=True) as session:
        outputs = session.apply_all(cycles[:40])
        outputs += [session.apply(inputs) for inputs in cycles[40:]]
        assert session.cycle == 60 and session.report.failed == 0, session.report.first
    assert outputs == golden_outputs(block, params, cycles)
    wrong = wrong_golden(block, "stall")
    with BACKENDS[name].session(wrong, params, golden=True) as session:
        session.apply_all(cycles[:10])
        assert session.report.failed == 10 and session.report.first.where == "cycle 0"


def test_a_batch_only_backend_refuses_a_session():
    batch_only = [backend for backend in BACKENDS.values() if not backend.sessions]
    assert batch_only, "no batch-only backend to test"
    block = registry.get(PIPELINE)
    for backend in batch_only:
        with pytest.raises(registry.RegistryError, match="batches only"):
            backend.session(block, block.resolve())
