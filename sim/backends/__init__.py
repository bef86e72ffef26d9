"""The simulation backends, each one object behind the harness's
:class:`~gpurtl.sim.harness.backend.Backend` interface.

:data:`BACKENDS` is the one list of them, by name; the command line, the sweeps and the bench
read it. :func:`get` looks one up by a name a user gave.
"""

from ..core.registry import RegistryError
from .fast import FastBackend, FastBehaviouralBackend
from .pysim import PysimBackend
from .sliced import GpuBackend, GpuBehaviouralBackend, SlicedBackend, SlicedBehaviouralBackend
from .verilator import IcarusBackend, VerilatorBackend

__all__ = ["BACKENDS", "get"]

#: Every backend, by name: Amaranth's Python simulator, cocotb on Verilator, the compiled
#: drivers (pipelines and cycle-stepped blocks) with the RTL FP32 cores or with behavioural ones,
#: cocotb on Icarus Verilog, and the bit-sliced netlist of a pipeline (with the RTL FP32 cores or
#: behavioural ones) on the CPU or a CUDA GPU (batches only).
BACKENDS = {
    backend.name: backend
    for backend in (
        PysimBackend(),
        VerilatorBackend(),
        FastBackend(),
        FastBehaviouralBackend(),
        IcarusBackend(),
        SlicedBackend(),
        SlicedBehaviouralBackend(),
        GpuBackend(),
        GpuBehaviouralBackend(),
    )
}


def get(name):
    """The backend called ``name``; raises :class:`~gpurtl.sim.core.registry.RegistryError`
    naming the known ones otherwise."""
    try:
        return BACKENDS[name]
    except KeyError:
        raise RegistryError(f"backend must be one of {', '.join(BACKENDS)}, not {name!r}") from None
