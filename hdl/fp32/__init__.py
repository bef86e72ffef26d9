"""Pipelined IEEE 754 binary32 datapath cores, bit-exact with :mod:`gpurtl.golden.fp32`.

Cores (``wiring.Component``, clock enable ``en``, no handshake; ``latency == stages``):
:class:`FPAddCore` (``sub`` input), :class:`FPMulCore`, :class:`FPFMACore`, :class:`FPCmpCore`,
:class:`FPMinMaxCore` (NaN propagating, ``-0 < +0``), :class:`FPRcpCore`, :class:`FPDivCore`
(both correctly rounded), :class:`FPToIntCore` and :class:`IntToFPCore` (conversions to and
from int32/uint32). Every core takes ``stages`` (0 = combinational, up to
``cls.max_stages()``) and ``ftz`` (flush subnormal inputs and results). The stream wrappers
registered as ``fp32_*`` blocks are :class:`FPStreamUnit` instances.
"""

from .add import FPAddCore
from .cmp import FPCmpCore
from .convert import FPToIntCore, IntToFPCore
from .div import FPDivCore, FPRcpCore
from .fma import FPFMACore
from .minmax import FPMinMaxCore
from .mul import FPMulCore
from .stream import UNITS, FPStreamUnit, unit_layouts

__all__ = [
    "FPAddCore",
    "FPMulCore",
    "FPFMACore",
    "FPCmpCore",
    "FPMinMaxCore",
    "FPRcpCore",
    "FPDivCore",
    "FPStreamUnit",
    "UNITS",
    "unit_layouts",
    "FPToIntCore",
    "IntToFPCore",
]
