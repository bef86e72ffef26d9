"""Golden reference of the ray accelerator's result format stage (the RTL ``ResultFormat``).

``format_result(tx)`` turns the aligned outputs of the paths into the instruction's
``OUT_LAYOUT`` result (the formats are listed in :mod:`.intersect`): ``ptrs[8]`` (sorted box
slots), ``control`` (the decoded controls of :mod:`.decode`), ``ray`` {``origin``, ``dir``};
with transforms ``instance_ray`` (the transformed ray) and ``instance`` (culled, BLAS pointer,
user data); with triangles ``triangle`` {``result[10]``, ``error``}, ``legacy``
{``result[2][4]``, ``error[2]``} and ``geometry_index[2]``.
"""

from gpurtl.facts.ray_accel import (
    INSTANCE_UNDEFINED_DW,
    INVALID_NODE,
    RESULT_DWORDS,
    STATUS_BAD_NODE,
    STATUS_OK,
)

__all__ = ["format_result"]


def format_result(tx, *, triangles=True, transforms=True):
    """``OUT_LAYOUT`` dictionary of one result-format input (see the module doc string)."""
    ctl = tx["control"]
    status = ctl["status"]
    dw = [int(p) for p in tx["ptrs"]] + [0, 0]
    origin, direction = list(tx["ray"]["origin"]), list(tx["ray"]["dir"])
    if transforms and ctl["is_instance"]:
        inst, u = tx["instance"], INSTANCE_UNDEFINED_DW
        packed = sum((int(p) & 0xFF) << (8 * k) for k, p in enumerate(tx["ptrs"][:4]))
        dw = [
            u,
            u,
            inst["blas_lo"],
            inst["blas_hi"],
            u,
            u,
            inst["user_data"],
            INVALID_NODE if inst["culled"] else packed,
            INVALID_NODE,
            INVALID_NODE,
        ]
        origin, direction = list(tx["instance_ray"]["origin"]), list(tx["instance_ray"]["dir"])
    if triangles:
        if ctl["is_triangle"]:
            dw = list(tx["triangle"]["result"])
            if tx["triangle"]["error"] and status == STATUS_OK:
                status = STATUS_BAD_NODE
        for k in range(2):
            if (ctl["dual_triangle"] >> k) & 1:
                dw[4 * k : 4 * k + 4] = list(tx["legacy"]["result"][k])
                dw[8 + k] = tx["geometry_index"][k]
    if status != STATUS_OK or ctl["blank"]:
        dw = [INVALID_NODE] * RESULT_DWORDS
    return {
        "dw": [int(v) & 0xFFFFFFFF for v in dw],
        "origin": origin,
        "dir": direction,
        "status": status,
    }
