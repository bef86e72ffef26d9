"""FP32 depth presets of the ray accelerator: how deep each FP32 core of a build is.

A design choice, not a fact of the hardware: AMD does not publish the depths of its FP32 units.
``"fpga"`` aims at clock rate on an FPGA, ``"shallow"`` at latency studies (one register per
core). The top level (:class:`~gpurtl.hdl.ray_accel.ray_accel.RayAccel`) and the blocks of its
components read the stage counts of each component from here, so a preset means the same
depths everywhere.

``"fpga"``
    The FP32 cores' default depths (add/mul 9, FMA 12, rcp/div 24 stages), transform FMAs 2
    stages, and a register between chained FP32 compares (the box engine's max3/min3, the sort
    network's compare and swap).
``"shallow"``
    One register per FP32 core everywhere (box path, transform, triangle paths). Zero stages
    would also simulate, but the box path would then be one combinational chain of about twenty
    FP32 operations.
"""

__all__ = [
    "FP_PRESETS",
    "check_preset",
    "box_engine_stages",
    "ray_setup_stages",
    "sort_stages",
    "triangle_stages",
]

#: FP32 core depths of each preset: box path ``add``/``mul``/``fma``/``rcp``, triangle path
#: ``div`` (and the same add/mul/fma), ray transform ``xf_fma`` (``None``: the core's default).
#: ``split_compares``: a register between chained FP32 compares (box engine c3, the sort
#: network's compare and swap), for clock rate on an FPGA.
FP_PRESETS = {
    "fpga": {
        "add": None,
        "mul": None,
        "fma": None,
        "rcp": None,
        "div": None,
        "xf_fma": 2,
        "split_compares": True,
    },
    "shallow": {
        "add": 1,
        "mul": 1,
        "fma": 1,
        "rcp": 1,
        "div": 1,
        "xf_fma": 1,
        "split_compares": False,
    },
}


def check_preset(fp):
    """Raise :exc:`ValueError` unless ``fp`` names a preset."""
    if fp not in FP_PRESETS:
        raise ValueError(f"`fp` must be one of {', '.join(map(repr, FP_PRESETS))}, not {fp!r}")


def box_engine_stages(fp):
    """Keyword arguments of :class:`~gpurtl.hdl.ray_accel.box_engine.BoxEngine` for ``fp``."""
    check_preset(fp)
    st = FP_PRESETS[fp]
    return {
        "add_stages": st["add"],
        "mul_stages": st["mul"],
        "fma_stages": st["fma"],
        "split_compares": st["split_compares"],
    }


def ray_setup_stages(fp):
    """Keyword arguments of :class:`~gpurtl.hdl.ray_accel.ray_setup.RaySetupUnit` for ``fp``."""
    check_preset(fp)
    st = FP_PRESETS[fp]
    return {"xf_fma_stages": st["xf_fma"], "rcp_stages": st["rcp"]}


def sort_stages(fp):
    """Keyword arguments of :class:`~gpurtl.hdl.ray_accel.sort_unit.SortUnit` for ``fp``."""
    check_preset(fp)
    return {"split_compares": FP_PRESETS[fp]["split_compares"]}


def triangle_stages(fp):
    """The ``stages`` dictionary of the triangle cores
    (:class:`~gpurtl.hdl.ray_accel.triangle_engine.TriangleEngine`) for ``fp``."""
    check_preset(fp)
    return {k: FP_PRESETS[fp][k] for k in ("add", "mul", "fma", "div")}
