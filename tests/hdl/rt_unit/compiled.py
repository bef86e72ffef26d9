"""The simulators the RT unit's lockstep runs on besides pysim: Verilator and Icarus Verilog
through cocotb (both in the ``verilator`` tier; Icarus skips, with the reason shown, where it is
not installed), as :mod:`tests.sim.backends.test_conformance` marks them."""

from ...sim.backends.test_conformance import backend_params

#: ``pytest.param`` of each cocotb backend, with its marks.
COCOTB = [param for param in backend_params() if param.values[0] in ("verilator", "icarus")]
