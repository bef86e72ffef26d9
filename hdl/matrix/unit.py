"""One dot-product unit alone behind streams: the cost of a format and algorithm.

:class:`DotUnit` is the step the matrix core replicates ``dots`` times (:class:`.dot.DotStep`),
with its ``L`` operand pairs, accumulator and control bits on one stream and its result on
another (:class:`gpurtl.hdl.pipe.EnableCoreStream`); it is what ``gpurtl experiment matrix``
synthesises per format and algorithm (the whole core adds the register tiles, the operand
selection and the accumulators around ``dots`` of these).
"""

from ..pipe import EnableCoreStream
from .dot import DotStep

__all__ = ["DotUnit"]


class DotUnit(EnableCoreStream):
    """One step unit of ``family`` under ``preset`` with ``stages`` registers (II 1).

    Attributes
    ----------
    i : In(stream.Signature(DotStep's input layout))
        Operand pairs, accumulator value, control bits.
    o : Out(stream.Signature(output format bits))
        Results in order, ``latency = stages`` cycles after their transfer with ``o.ready`` high.
    """

    def __init__(self, family, preset="rdna4", stages=2):
        super().__init__(DotStep(family, preset, stages))
