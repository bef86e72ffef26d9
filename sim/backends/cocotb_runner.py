"""cocotb's runner in a process of its own.

cocotb's runner reads the simulator's environment (``PATH``, ``VERILATOR_ROOT``) from
``os.environ``, and its ``extra_env`` cannot override those. Changing ``os.environ`` in the calling
process is unsafe where several runs share one process (threads of a Dask worker), so every build
and test runs here, in a child process started with the environment it needs
(:func:`start`); the calling process's environment is never touched.

A job is a JSON file: ``{"simulator": "verilator" | "icarus", "action": "build" | "test",
"kwargs": {...}}``: cocotb's runner of that simulator and the keyword arguments of its ``build``
or ``test``.
"""

import json
import subprocess
import sys

from ..core.export import verilator_env

__all__ = ["run", "start"]


#: What the child process runs: the runner's ``build`` or ``test`` with the job's arguments (no
#: import of this package, whose start-up the child does not need).
_CHILD = """\
import json, sys
from cocotb_tools.runner import get_runner
with open(sys.argv[1]) as file:
    job = json.load(file)
getattr(get_runner(job["simulator"]), job["action"])(**job["kwargs"])
"""


def _command(job_path):
    return [sys.executable, "-c", _CHILD, str(job_path)]


def _env(extra_env):
    env = verilator_env()
    # Under pytest the runner turns a failed cocotb test into sys.exit(); the caller reads the
    # test's result file instead, wherever it runs.
    env.pop("PYTEST_CURRENT_TEST", None)
    env.update(extra_env or {})
    return env


def _write_job(job_path, simulator, action, kwargs):
    with open(job_path, "w") as file:
        json.dump({"simulator": simulator, "action": action, "kwargs": kwargs}, file)


def run(job_path, action, kwargs, *, simulator="verilator", extra_env=None):
    """Run the ``simulator`` runner's ``action`` (``"build"`` or ``"test"``) with ``kwargs`` to
    completion; returns the child's exit status. ``extra_env`` is added to the child's
    environment."""
    _write_job(job_path, simulator, action, kwargs)
    return subprocess.run(
        _command(job_path), env=_env(extra_env), stdin=subprocess.DEVNULL
    ).returncode


def start(job_path, action, kwargs, *, simulator="verilator", extra_env=None):
    """:func:`run` without waiting: returns the :class:`subprocess.Popen` of the child."""
    _write_job(job_path, simulator, action, kwargs)
    return subprocess.Popen(_command(job_path), env=_env(extra_env), stdin=subprocess.DEVNULL)
