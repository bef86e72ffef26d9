"""The sources of the fast backend's cycle driver for one block build (see :mod:`.cycle`):
``cycle_driver.cpp`` and ``cycle_common.h`` (package data beside this module), the generated
``cycle_config.h`` (the block's packed widths and fields) and, for a block with a compiled
stimulus, its ``stimulus/BLOCK.h`` with the constants it needs."""

import os
from pathlib import Path

import numpy as np

from ...core import layouts
from ...core.files import UsageError
from ...core.words import width_of, words_of

__all__ = [
    "STIMULI",
    "STIMULUS_ENV",
    "config_header",
    "driver_files",
    "stimulus_data",
    "stimulus_mode",
]

_HERE = Path(__file__).parent

#: Environment variable choosing where a cycle block's stimulus is made on the fast backend:
#: ``compiled`` (the default where the block has one, see :data:`STIMULI`) or ``python`` (the
#: block's own ``stimulus``, replayed).
STIMULUS_ENV = "GPURTL_FAST_STIMULUS"


def _ident(path):
    """A C++ identifier of a leaf's dotted path (``ret.load.valid`` -> ``ret_load_valid``)."""
    return "".join(c if c.isalnum() else "_" for c in path).strip("_") or "value"


def _fields(prefix, layout):
    lines = []
    for leaf in layouts.leaves(layout):
        if leaf.width <= 64:
            lines.append(
                f"static const Field {prefix}_{_ident(leaf.path)} = {{{leaf.offset}, {leaf.width}}};"
            )
    return lines


def _array(name, ctype, values):
    return f"static const {ctype} {name}[] = {{{', '.join(str(v) for v in values)}}};"


def _waitcnt_constants(generation, waves, full_policy):
    """The constants of ``stimulus/waitcnt.h``: the profile's counters, class map and wait
    forms (see :mod:`gpurtl.facts.waitcnt`)."""
    from gpurtl.facts.waitcnt import InstClass, profile

    prof = profile(generation)
    classes = sorted(InstClass, key=lambda c: c.value)
    if [c.value for c in classes] != list(range(len(classes))):
        raise ValueError("the instruction classes must be numbered 0, 1, ...")
    masks = [sum(1 << prof.counters.index(n) for n in prof.class_map[cls]) for cls in classes]
    most = max(len(form.fields) for form in prof.waits)
    if most > 4:
        raise ValueError("the compiled waitcnt stimulus takes up to 4 fields a wait form")

    def table(values):
        rows = [values(form) + [0] * (4 - len(form.fields)) for form in prof.waits]
        return "{" + ", ".join("{" + ", ".join(map(str, row)) + "}" for row in rows) + "}"

    base = [form.encode(**{f.counters[0]: 0 for f in form.fields}) for form in prof.waits]
    return [
        f"static const int WAVES = {waves};",
        f"static const int COUNTERS = {len(prof.counters)};",
        f"static const int CLASSES = {len(classes)};",
        _array("CLASS_COUNTERS", "uint32_t", masks),
        "static const Field RET_VALID[] = {"
        + ", ".join(f"IN_ret_{n}_valid" for n in prof.counters)
        + "};",
        "static const Field RET_WAVE[] = {"
        + ", ".join(f"IN_ret_{n}_wave" for n in prof.counters)
        + "};",
        f"static const int FORMS = {len(prof.waits)};",
        _array("FORM_BASE", "uint32_t", [f"0x{word:08x}u" for word in base]),
        _array("FORM_FIELDS", "int", [len(form.fields) for form in prof.waits]),
        "static const uint32_t FORM_LO_SHIFT[][4] = "
        + table(lambda form: [f.lo_shift for f in form.fields])
        + ";",
        "static const uint32_t FORM_LO_BITS[][4] = "
        + table(lambda form: [f.lo_bits for f in form.fields])
        + ";",
        "static const uint32_t FORM_HI_SHIFT[][4] = "
        + table(lambda form: [f.hi_shift for f in form.fields])
        + ";",
        "static const uint32_t FORM_HI_BITS[][4] = "
        + table(lambda form: [f.hi_bits for f in form.fields])
        + ";",
    ]


def _payload_leaves(in_layout):
    """The ``inst.payload`` leaves of ``rt_unit``'s input layout, in layout order."""
    return [leaf for leaf in layouts.leaves(in_layout) if leaf.path.startswith("inst.payload.")]


def _leaf_values(in_layout, inputs, prefix):
    """``{path: raw bits}`` of the leaves under ``prefix`` of the packed ``inputs``."""
    bits = layouts.pack(in_layout, inputs)
    return {
        leaf.path: (bits >> leaf.offset) & ((1 << leaf.width) - 1)
        for leaf in layouts.leaves(in_layout)
        if leaf.path.startswith(prefix)
    }


def _rt_unit_constants(block, params):
    """The constants of ``stimulus/rt_unit.h``: the build's sizes, where the payload fields it
    sets are, the usual descriptor and the ``s_wait_bvhcnt`` words."""
    from gpurtl.facts.waitcnt import profile
    from gpurtl.golden.ray_accel.encode.ray import default_desc

    in_layout, _ = block.layouts(**params)
    payload = _payload_leaves(in_layout)
    if any(leaf.width > 64 for leaf in payload):
        raise ValueError("the compiled rt_unit stimulus takes payload fields of up to 64 bits")
    position = {leaf.path: k for k, leaf in enumerate(payload)}
    defaults = block.input_defaults(params)
    defaults["inst"]["payload"]["desc"] = default_desc()
    desc = _leaf_values(in_layout, defaults, "inst.payload.desc.")
    ray = [leaf.path for leaf in payload if leaf.path.startswith("inst.payload.ray.")]
    fill = next(leaf for leaf in layouts.leaves(in_layout) if leaf.path == "fill.payload.data")
    wait = next(form for form in profile("gfx12").waits if form.name == "s_wait_bvhcnt")
    return [
        f"static const int WAVES = {1 << params['tag_bits']};",
        f"static const int LINE_BITS = {params['line_bits']};",
        f"static const int BEATS = {params['beats']};",
        f"static const uint32_t FILL_DATA_OFFSET = {fill.offset};",
        "static const Field PAYLOAD_FIELDS[] = {"
        + ", ".join(f"IN_{_ident(leaf.path)}" for leaf in payload)
        + "};",
        *(
            f"static const int P_{name.upper()} = {position['inst.payload.' + path]};"
            for name, path in (
                ("tag", "tag"),
                ("last", "last"),
                ("dual", "dual"),
                ("node_ptr", "node_ptr[0]"),
                ("pointer_flags", "pointer_flags"),
            )
        ),
        _array("DESC_PAYLOAD", "int", [position[path] for path in desc]),
        _array("DESC_VALUES", "uint64_t", [f"{value}ULL" for value in desc.values()]),
        _array("RAY_PAYLOAD", "int", [position[path] for path in ray]),
        _array("BVH_WAITS", "uint64_t", [f"0x{wait.encode(bvh=k):x}ULL" for k in range(8)]),
    ]


def _rt_unit_image(block, params, seed, path):
    """Write the memory image of ``stimulus/rt_unit.h`` (see there) for ``seed`` to ``path``."""
    from gpurtl.sim.blocks.rt_unit import memory_image

    rng = np.random.default_rng(seed)
    rays, working, data, pool = memory_image(rng, **params)
    in_layout, _ = block.layouts(**params)
    ray_paths = [
        leaf.path
        for leaf in _payload_leaves(in_layout)
        if leaf.path.startswith("inst.payload.ray.")
    ]
    values = []
    for ray in rays:
        inputs = block.input_defaults(params)
        inputs["inst"]["payload"]["ray"] = ray
        found = _leaf_values(in_layout, inputs, "inst.payload.ray.")
        values.append([found[path] for path in ray_paths])
    with open(path, "wb") as image:
        np.array([len(working), len(pool[0]), len(ray_paths)], dtype="<u4").tofile(image)
        np.array(working, dtype="<u8").tofile(image)
        np.array(values, dtype="<u8").tofile(image)
        np.array(data, dtype=np.uint64).astype("<u4").tofile(image)
        np.array(pool, dtype=np.uint64).astype("<u4").tofile(image)


#: Blocks with a compiled stimulus: block name -> (header in ``stimulus/``, the function of the
#: block and its parameters that gives the header's constants as C++ lines, and ``None`` or the
#: function ``(block, params, seed, path)`` that writes the data file the stimulus reads).
STIMULI = {
    "waitcnt": ("waitcnt.h", lambda block, params: _waitcnt_constants(**params), None),
    "rt_unit": ("rt_unit.h", _rt_unit_constants, _rt_unit_image),
}


def stimulus_mode(block):
    """``"compiled"`` when ``block`` has a compiled stimulus and ``$GPURTL_FAST_STIMULUS`` does
    not say ``python``; else ``"python"``."""
    mode = os.environ.get(STIMULUS_ENV, "compiled")
    if mode not in ("compiled", "python"):
        raise UsageError(f"${STIMULUS_ENV} must be `compiled` or `python`, not {mode!r}")
    return mode if block.name in STIMULI else "python"


def config_header(top, block, params):
    """``cycle_config.h`` of the verilated module ``V<top>`` of ``block`` with ``params``."""
    in_layout, out_layout = block.layouts(**params)
    in_width = width_of(in_layout)
    top_bits = in_width - 32 * (words_of(in_width) - 1)
    lines = [
        f"// The build of `{block.name}` the cycle driver steps (gpurtl.sim.backends.fast.cycle).",
        "#pragma once",
        f'#include "V{top}.h"',
        '#include "cycle_common.h"',
        f"typedef V{top} Top;",
        f"static const int IN_WORDS = {words_of(in_width)};",
        f"static const int OUT_WORDS = {words_of(width_of(out_layout))};",
        f"static const uint32_t IN_MASK = 0x{(1 << top_bits) - 1:x}u;",
        *_fields("IN", in_layout),
        *_fields("OUT", out_layout),
    ]
    if block.name in STIMULI:
        lines += ["#define STIMULUS 1", *STIMULI[block.name][1](block, params)]
    return "\n".join(lines) + "\n"


def driver_files(top, block, params):
    """The sources of a cycle block's driver: ``{file name: text}`` (``.cpp`` files compile,
    the headers are included)."""
    files = {
        "driver.cpp": (_HERE / "cycle_driver.cpp").read_text(),
        "cycle_common.h": (_HERE / "cycle_common.h").read_text(),
        "cycle_model.h": (_HERE / "cycle_model.h").read_text(),
        "cycle_config.h": config_header(top, block, params),
    }
    if block.name in STIMULI:
        files["stimulus.h"] = (_HERE / "stimulus" / STIMULI[block.name][0]).read_text()
    return files


def stimulus_data(block, params, seed, path):
    """Write the data file of ``block``'s compiled stimulus for ``seed`` to ``path`` and return
    ``[path]`` (the driver's last argument), or ``[]`` for a stimulus that reads none."""
    image = STIMULI[block.name][2]
    if image is None:
        return []
    image(block, params, seed, path)
    return [path]
