"""Integer codes shared by the allocator golden models (the values of
:class:`gpurtl.facts.vgpr_alloc.Op` and ``Err``)."""

from gpurtl.facts.vgpr_alloc import Err, Op

__all__ = ["OP", "ERR", "as_op"]


class OP:
    NONE, LAUNCH, ALLOC, END = (Op.NONE.value, Op.LAUNCH.value, Op.ALLOC.value, Op.END.value)


class ERR:
    NONE = Err.NONE.value
    BAD_SLOT = Err.BAD_SLOT.value
    SLOT_BUSY = Err.SLOT_BUSY.value
    NOT_RESIDENT = Err.NOT_RESIDENT.value
    OVER_MAX = Err.OVER_MAX.value
    BAD_OP = Err.BAD_OP.value


def as_op(value):
    """The integer code of an op given as int, :class:`Op` member or name."""
    if isinstance(value, str):
        return Op[value].value
    return int(getattr(value, "value", value))
