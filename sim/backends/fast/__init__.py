"""The ``fast`` simulation backend: a pipeline block's Verilog compiled by Verilator with a
generated C++ driver that streams packed transactions from a file (no Python per cycle).

* :mod:`.top`: :class:`BatchTop`, the simulation wrapper that keeps ``o.ready`` out of the
  block's registers;
* :mod:`.driver`: the generated C++ driver;
* :mod:`.build`: export, Verilator build and the build cache;
* :mod:`.words`: stimulus and golden outputs as packed rows of 32-bit words;
* :mod:`.run`: running the model on a file of transactions and comparing with the golden model.
"""

from .build import TOPS, BuildError
from .run import FastReport, check, run_transactions
from .top import BatchTop

__all__ = ["TOPS", "BuildError", "FastReport", "check", "run_transactions", "BatchTop"]
