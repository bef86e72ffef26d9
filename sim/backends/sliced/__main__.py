"""``python -m gpurtl.sim.backends.sliced BLOCK ...``: the gpu kernel's throughput
(:func:`gpurtl.sim.backends.sliced.gpu.main`)."""

import sys

from .gpu import main

sys.exit(main())
