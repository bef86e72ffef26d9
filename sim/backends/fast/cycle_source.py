"""The sources of the fast backend's cycle driver for one block build (see :mod:`.cycle`):
``cycle_driver.cpp`` and ``cycle_common.h`` (package data beside this module), the generated
``cycle_config.h`` (the block's packed widths and fields) and, for a block with a compiled
stimulus, its ``stimulus/BLOCK.h`` with the constants it needs."""

import os
from pathlib import Path

from ...core import layouts
from ...core.files import UsageError
from ...core.words import width_of, words_of

__all__ = ["STIMULI", "STIMULUS_ENV", "config_header", "driver_files", "stimulus_mode"]

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


#: Blocks with a compiled stimulus: block name -> (header in ``stimulus/``, the function of the
#: block's parameters that gives the header's constants as C++ lines).
STIMULI = {"waitcnt": ("waitcnt.h", _waitcnt_constants)}


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
        lines += ["#define STIMULUS 1", *STIMULI[block.name][1](**params)]
    return "\n".join(lines) + "\n"


def driver_files(top, block, params):
    """The sources of a cycle block's driver: ``{file name: text}`` (``.cpp`` files compile,
    the headers are included)."""
    files = {
        "driver.cpp": (_HERE / "cycle_driver.cpp").read_text(),
        "cycle_common.h": (_HERE / "cycle_common.h").read_text(),
        "cycle_config.h": config_header(top, block, params),
    }
    if block.name in STIMULI:
        files["stimulus.h"] = (_HERE / "stimulus" / STIMULI[block.name][0]).read_text()
    return files
