"""The intersect instruction computed the way the RTL top level computes it: the golden references
of its components, chained stage by stage as :class:`gpurtl.hdl.ray_accel.ray_accel.RayAccel`
wires them.

=================  ===================================================  ======================
stage              golden reference                                     RTL component
=================  ===================================================  ======================
``decode``         :func:`.scalar.decode.decode`                        ``NodeDecode``
``ray_setup``      :func:`.scalar.setup.ray_setup`                      ``RaySetupUnit``
``box_engine``     :func:`.scalar.box_test.box_engine`                  ``BoxEngine``
``dedup``          :func:`.scalar.box_path.dedup_slots`                 ``DedupUnit``
``sort``           :func:`.scalar.sort.sort_slots`                      ``SortUnit``
``triangle``       :func:`.scalar.triangle.triangle_pair_eval`          ``TrianglePairCore``
``legacy``         :func:`.scalar.triangle.legacy_triangle_result`      ``LegacyTriangleCore``
``result``         :func:`.scalar.result.format_result`                 ``ResultFormat``
=================  ===================================================  ======================

Every stage is a function of one transaction dictionary (the fields of the RTL component's input
layout) returning one dictionary (its output layout), as the registry's component blocks use
them. :func:`intersect_chain` gives, bit for bit, what the instruction model
:func:`.scalar.intersect.intersect` gives for the node kinds of the build (``triangles``,
``transforms``); other kinds give status 1 on both sides. So a component checked in lockstep
against its own reference is also checked as a part of the whole instruction.

``stages`` replaces stages by name with other functions of the same contract: a variant of one
component can be tried in the chain without the others changing. The triangle paths are
evaluated only where the result format reads them (the RTL computes them for every instruction
and drops what it does not need).
"""

from .encode.ray import node_bytes
from .scalar import sort, triangle
from .scalar.box_path import dedup_slots
from .scalar.box_test import box_engine
from .scalar.decode import decode
from .scalar.result import format_result
from .scalar.setup import ray_setup

__all__ = ["STAGES", "chain_stages", "intersect_chain"]

#: The stage names, in the order a box-path instruction passes them.
STAGES = ("decode", "ray_setup", "box_engine", "dedup", "sort", "triangle", "legacy", "result")


def _sort(tx, *, ftz):
    """The sort unit: ``slots[8]`` {``ptr``, ``key``}, ``enable``, ``wide``, ``stf`` ->
    ``ptrs[8]`` (in slot order when ``enable`` is 0)."""
    ptrs = [int(s["ptr"]) for s in tx["slots"]]
    if tx["enable"]:
        keys = [s["key"] for s in tx["slots"]]
        ptrs = sort.sort_slots(ptrs, keys, tx["stf"], wide=bool(tx["wide"]), ftz=ftz)
    return {"ptrs": ptrs}


def _triangle(tx):
    """The triangle-pair path: the instruction's ``ray``, ``node`` (32 dwords), ``node_ptr``,
    ``pointer_flags``, ``desc`` -> ``result[10]``, ``error``."""
    res = triangle.triangle_pair_eval(
        node_bytes(tx["node"]), tx["node_ptr"], tx["ray"], tx["pointer_flags"], tx["desc"]
    )
    return {"result": list(res["dwords"]), "error": int(res["error"])}


def _legacy(tx):
    """The dual form's legacy triangle nodes: ``node[2]``, ``node_ptr[2]`` and the operands,
    ``dual_triangle`` (a bit per node) -> ``result[2][4]``, ``error[2]`` (zero for a node
    that is not a triangle: the result format does not read it)."""
    out = {"result": [[0] * 4, [0] * 4], "error": [0, 0]}
    for k in range(2):
        if (tx["dual_triangle"] >> k) & 1:
            res = triangle.legacy_triangle_result(
                node_bytes(tx["node"][k]),
                tx["node_ptr"][k],
                tx["ray"],
                tx["pointer_flags"],
                tx["desc"],
            )
            out["result"][k] = list(res)[:4]
    return out


def chain_stages(*, triangles=True, transforms=True, ftz=False):
    """``{stage: function}`` of one build: every name of :data:`STAGES`."""
    return {
        "decode": lambda tx: decode(tx, triangles=triangles, transforms=transforms),
        "ray_setup": lambda tx: ray_setup(tx, transforms=transforms, ftz=ftz),
        "box_engine": lambda tx: box_engine(tx, ftz=ftz),
        "dedup": dedup_slots,
        "sort": lambda tx: _sort(tx, ftz=ftz),
        "triangle": _triangle,
        "legacy": _legacy,
        "result": lambda tx: format_result(tx, triangles=triangles, transforms=transforms),
    }


def _box_path(d, run):
    """The sorted box slot pointers of a decoded instruction ``d``; also the ray setup's output."""
    ctl = d["control"]
    setup_in = {"origin": d["ray"]["origin"], "dir": d["ray"]["dir"]}
    if "transform" in d:
        setup_in.update(obb_index=d["obb_index"], transform=d["transform"])
    setup = run["ray_setup"](setup_in)
    engine = run["box_engine"](
        {
            "base": d["base"],
            "boxes": d["planes"],
            "inv_dir": setup["inv_dir"],
            "ray": {
                "origin": setup["ray"]["origin"],
                "extent": d["ray"]["extent"],
                "box_grow": ctl["box_grow"],
                "heuristic": ctl["heuristic"],
            },
        }
    )
    tested = [
        {"ptr": ptr, "hit": box["hit"], "key": box["key"]}
        for ptr, box in zip(d["ptrs"], engine["boxes"])
    ]
    slots = run["dedup"]({"slots": tested, "dedup": int(not ctl["dual"])})["slots"]
    sorted_ = run["sort"](
        {
            "slots": slots,
            "enable": ctl["sort_enable"],
            "wide": ctl["sort_wide"],
            "stf": ctl["sort_tri_first"],
        }
    )
    return sorted_["ptrs"], setup


def intersect_chain(instr, *, triangles=True, transforms=True, ftz=False, stages=None):
    """``OUT_LAYOUT`` dictionary of one ``INSTR_LAYOUT`` instruction, from the component
    references alone (see the module doc string).

    Parameters
    ----------
    instr : dict
        One instruction (``INSTR_LAYOUT`` fields).
    triangles, transforms, ftz : bool
        The build, as the ``RayAccel`` parameters of the same names.
    stages : dict, optional
        Stage name -> function replacing that stage (names from :data:`STAGES`).
    """
    run = chain_stages(triangles=triangles, transforms=transforms, ftz=ftz)
    for name, func in (stages or {}).items():
        if name not in run:
            raise ValueError(f"`stages` keys must be among {', '.join(STAGES)}, not {name!r}")
        run[name] = func
    d = run["decode"](instr)
    ptrs, setup = _box_path(d, run)
    tx = {
        "ptrs": ptrs,
        "control": d["control"],
        "ray": {"origin": d["ray"]["origin"], "dir": d["ray"]["dir"]},
    }
    if transforms:
        tx.update(instance_ray=setup["ray"], instance=d["instance"])
    if triangles:
        operands = {k: instr[k] for k in ("ray", "pointer_flags", "desc")}
        tx["triangle"] = {"result": [0] * 10, "error": 0}
        if d["control"]["is_triangle"]:
            tx["triangle"] = run["triangle"](
                dict(operands, node=instr["node"][0], node_ptr=instr["node_ptr"][0])
            )
        tx["legacy"] = run["legacy"](
            dict(
                operands,
                node=instr["node"],
                node_ptr=instr["node_ptr"],
                dual_triangle=d["control"]["dual_triangle"],
            )
        )
        tx["geometry_index"] = d["geometry_index"]
    return run["result"](tx)
