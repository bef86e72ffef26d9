"""What the gpu tests share: the reason a CUDA device cannot be used here, and the kernels'
host builds in the device's place (``gpu.gpu_run`` replaced)."""

import subprocess

import numpy as np
import pytest

from gpurtl.sim.backends.sliced import gpu
from gpurtl.sim.core.export import ToolchainError


def _no_cuda():
    try:
        gpu.cuda()
    except ToolchainError as error:
        return str(error)
    return None


#: Why the gpu backend cannot run here, or ``None``.
NO_CUDA = _no_cuda()
needs_cuda = pytest.mark.skipif(NO_CUDA is not None, reason=NO_CUDA or "")


def compile_host(path, source):
    """``source`` (C++) compiled at ``path`` + ``.cpp`` into the executable ``path``."""
    path.with_suffix(".cpp").write_text(source)
    subprocess.run(
        ["c++", "-O1", "-std=c++17", "-o", str(path), str(path.with_suffix(".cpp"))], check=True
    )
    return path


class OnHost:
    """Stands in for CuPy and the device: :meth:`gpu_run` runs the host build of the kernel it
    is given (the straight-line one, or the interpreted one with its ``program``)."""

    def __init__(self, tmp_path):
        self.tmp_path, self.built = tmp_path, {}

    def gpu_run(self, source, rows, count, *, lanes, seed, p_valid, p_ready, free_run, **options):
        program = options.get("program")
        main = gpu._HOST_MAIN if program is None else gpu._HOST_INTERP_MAIN
        executable = self.built.get(source)
        if executable is None:
            path = self.tmp_path / f"kernel{len(self.built)}"
            executable = compile_host(path, "#define SLICED_HOST 1\n" + source + main)
            self.built[source] = executable
        rows = np.ascontiguousarray(rows, dtype="<u4")
        rows.tofile(self.tmp_path / "in.bin")
        command = [str(executable)]
        if program is not None:
            program.words.tofile(self.tmp_path / "prog.bin")
            command.append(str(self.tmp_path / "prog.bin"))
        command += [str(self.tmp_path / "in.bin"), str(self.tmp_path / "out.bin")]
        command += [str(count), str(len(rows)), str(lanes), str(seed)]
        command += [str(gpu.threshold_of(p_valid)), str(gpu.threshold_of(p_ready))]
        command += [str(free_run), "10000"]
        if program is not None:
            command += [str(program.nodes), str(program.line_words), str(program.held)]
        done = subprocess.run(command, capture_output=True, text=True, check=True)
        records = np.fromfile(self.tmp_path / "out.bin", dtype="<u4").reshape(count, -1)
        assert records.shape[1] == options["out_words"] + 4

        class Device:
            def get(self):
                return records

        clock_cycles = int(done.stdout.split('"clock_cycles": ')[1].split(",")[0])
        return Device(), clock_cycles, 0.001, 0.0
