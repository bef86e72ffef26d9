"""Sweep specs: the TOML file read and checked (:func:`load_spec`) into a :class:`SweepSpec`.

A spec names what to run at every point of a parameter grid:

.. code-block:: toml

    [sweep]
    name = "fp32-depth"               # output folder name and report title
    run = "synth"                     # "synth", "check" or "experiment"
    blocks = ["fp32_add", "fp32_mul"] # or block = "..."; experiment = "..." for run = "experiment"

    [sweep.options]                   # per-run options (see OPTIONS below)
    device = "ecp5-85k"
    freq = 150

    [sweep.fixed]                     # parameters every point shares (optional)
    ftz = false

    [sweep.grid]                      # the Cartesian product of these lists ...
    stages = [2, 4, 6, 8]

    # ... and/or an explicit list of parameter sets:
    # [[sweep.points]]
    # stages = 37

Every mistake is reported as one :class:`SpecError` naming the file, the line and the key. The
specs shipped with the package are in ``specs/`` beside this module (:func:`shipped`).
"""

import itertools
import tomllib
from pathlib import Path

__all__ = [
    "HEAT_METRIC",
    "OPTIONS",
    "RUN_KINDS",
    "SpecError",
    "SweepSpec",
    "load_spec",
    "shipped",
]

RUN_KINDS = ("synth", "check", "experiment")

#: Options each run kind accepts in ``[sweep.options]``: name -> (type, default).
OPTIONS = {
    "synth": {
        "device": (str, "ecp5-85k"),
        "freq": ((int, float), 100.0),
        "synth_only": (bool, False),
        "keep_hierarchy": (bool, False),
        "nodsp": (bool, False),
        "seed": (int, 1),
    },
    "check": {"count": (int, None), "seed": (int, 0), "backend": (str, "pysim")},
    "experiment": {},
}

#: The metric shown in heat maps, per run kind.
HEAT_METRIC = {"synth": "fmax_mhz", "check": "failed", "experiment": None}

#: The keys of the ``[sweep]`` table.
KEYS = (
    "name",
    "run",
    "block",
    "blocks",
    "experiment",
    "options",
    "fixed",
    "grid",
    "points",
    "metric",
)

#: Folder of the specs shipped with the package.
SHIPPED = Path(__file__).parent / "specs"


class SpecError(Exception):
    """A malformed sweep spec; the message names the file, line and key."""


def shipped(name):
    """The shipped spec called ``name`` (``fp32-depth``), or ``None``."""
    path = SHIPPED / f"{name.replace('-', '_')}.toml"
    return path if path.exists() else None


class SweepSpec:
    """A parsed, validated sweep spec.

    Parameters
    ----------
    name : str
        Report title and output folder name.
    run : str
        One of :data:`RUN_KINDS`.
    targets : tuple of str
        Block names (``synth``, ``check``) or one experiment name.
    points : list of dict
        Parameter sets, in order.
    options : dict
        Options of the run kind, defaults filled in.
    path : Path
        The spec file.
    grid_names : tuple of str
        The parameters of ``[sweep.grid]``, in order (the last two are a heat map's axes).
    metric : str or None
        The result metric a heat map shows (``[sweep] metric``; by default Fmax for ``synth``,
        failed transactions for ``check``, the first metric of an experiment).
    """

    def __init__(self, *, name, run, targets, points, options, path, grid_names=(), metric=None):
        self.name, self.run, self.targets = name, run, tuple(targets)
        self.points, self.options, self.path = points, options, Path(path)
        self.grid_names, self.metric = tuple(grid_names), metric

    def tasks(self):
        """Every (target, params) pair, in order."""
        return [(target, dict(params)) for target in self.targets for params in self.points]


def _line_of(text, key, section=None):
    """1-based line of ``key = ...`` (inside ``[section]`` when given), or of the section."""
    lines = text.splitlines()
    current = None
    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        if stripped.startswith("["):
            current = stripped.strip("[]").strip()
            if key is None and current == section:
                return number
            continue
        if key is not None and (section is None or current == section):
            head = stripped.split("=", 1)[0].strip().strip('"')
            if "=" in stripped and head == key:
                return number
    return 1


class _Reader:
    """The text of a spec, to name the line of a key in an error."""

    def __init__(self, path, text):
        self.path, self.text = path, text

    def fail(self, message, key=None, section="sweep"):
        line = _line_of(self.text, key, section)
        where = f"`{key}`" if key else f"[{section}]"
        raise SpecError(f"{self.path}, line {line}, {where}: {message}")


def _read(path):
    try:
        text = path.read_text()
    except OSError as error:
        raise SpecError(f"{path}: cannot read the sweep spec ({error.strerror})") from None
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise SpecError(f"{path}: not valid TOML: {error}") from None
    sweep = doc.get("sweep")
    if not isinstance(sweep, dict):
        raise SpecError(f"{path}, line 1: a `[sweep]` table is required")
    return _Reader(path, text), sweep


def _experiment_target(reader, sweep):
    from .. import experiments

    target = sweep.get("experiment")
    if not isinstance(target, str):
        reader.fail('an experiment name is required for run = "experiment"', "experiment")
    found = experiments.experiments()
    if target not in found:
        reader.fail(f"must be one of {', '.join(found)}, not {target!r}", "experiment")
    if not getattr(found[target], "PARAMS", None):  # the parameters a point of it may set
        sweepable = [n for n, m in found.items() if getattr(m, "PARAMS", None)]
        reader.fail(
            f"experiment `{target}` has no per-point parameters (`PARAMS`); sweepable "
            f"experiments: {', '.join(sweepable) or 'none'}",
            "experiment",
        )
    return (target,)


def _block_targets(reader, sweep):
    from ..core import registry

    if "block" in sweep and "blocks" in sweep:
        reader.fail("give `block` or `blocks`, not both", "blocks")
    targets = sweep.get("blocks", [sweep["block"]] if "block" in sweep else None)
    key = "blocks" if "blocks" in sweep else "block"
    if not targets or not isinstance(targets, list) or not all(isinstance(t, str) for t in targets):
        reader.fail('a block name (`block = "..."`) or a list (`blocks = [...]`) is required', key)
    for target in targets:
        try:
            registry.get(target)
        except registry.RegistryError as error:
            reader.fail(str(error), key)
    return tuple(targets)


def _options(reader, sweep, run):
    given = sweep.get("options", {})
    if not isinstance(given, dict):
        reader.fail("must be a table", "options")
    for key, value in given.items():
        if key not in OPTIONS[run]:
            reader.fail(
                f'unknown option for run = "{run}"; expected one of '
                f"{', '.join(OPTIONS[run]) or 'none'}",
                key,
                "sweep.options",
            )
        kind, _ = OPTIONS[run][key]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            reader.fail(
                f"must be of type {getattr(kind, '__name__', 'number')}, not {value!r}",
                key,
                "sweep.options",
            )
    options = {key: given.get(key, default) for key, (_, default) in OPTIONS[run].items()}
    _check_option_values(reader, run, options)
    return options


def _check_option_values(reader, run, options):
    def fail(message, key):
        reader.fail(message, key, "sweep.options")

    if run == "synth":
        from ..tools.synth import DEVICES

        if options["device"] not in DEVICES:
            fail(f"must be one of {', '.join(DEVICES)}, not {options['device']!r}", "device")
        if not options["freq"] > 0:
            fail(f"must be a positive frequency in MHz, not {options['freq']!r}", "freq")
    if run == "check":
        from ..backends import BACKENDS

        if options["count"] is not None and options["count"] < 1:
            fail(f"must be a positive integer, not {options['count']}", "count")
        if options["backend"] not in BACKENDS:
            fail(f"must be one of {', '.join(BACKENDS)}, not {options['backend']!r}", "backend")


def _parameter_names(run, target):
    """The parameter names a point of ``target`` takes, or ``None`` when any name is taken."""
    if run != "experiment":
        from ..core import registry

        return [param.name for param in registry.get(target).params]
    from .. import experiments

    return list(experiments.get(target).PARAMS)


def _points(reader, sweep, run, targets):
    """The parameter sets of the spec, and the names of its grid."""
    fixed = sweep.get("fixed", {})
    grid = sweep.get("grid", {})
    given = sweep.get("points", [])
    for key, value in (("fixed", fixed), ("grid", grid)):
        if not isinstance(value, dict):
            reader.fail("must be a table", key)
    for key, values in grid.items():
        if not isinstance(values, list) or not values:
            reader.fail("a grid entry must be a non-empty list of values", key, "sweep.grid")
    if not isinstance(given, list) or not all(isinstance(p, dict) for p in given):
        reader.fail("must be an array of tables ([[sweep.points]])", "points")
    sections = [("sweep.fixed", fixed), ("sweep.grid", grid)]
    sections += [("sweep.points", point) for point in given]
    for target in targets:
        known = _parameter_names(run, target)
        for section, params in sections:
            for key in params:
                if known is not None and key not in known:
                    reader.fail(
                        f"`{target}` has no parameter `{key}`; known: {', '.join(known) or 'none'}",
                        key,
                        section,
                    )
    names = list(grid)
    points = [
        {**fixed, **dict(zip(names, combo))}
        for combo in (itertools.product(*(grid[n] for n in names)) if grid else ())
    ]
    points += [{**fixed, **point} for point in given]
    return points or [dict(fixed)], tuple(names)


def load_spec(path):
    """Read and validate a sweep spec; raises :class:`SpecError` naming file, line and key."""
    path = Path(path)
    reader, sweep = _read(path)
    for key in sweep:
        if key not in KEYS:
            reader.fail(f"unknown key; expected one of {', '.join(sorted(KEYS))}", key)
    run = sweep.get("run")
    if run not in RUN_KINDS:
        reader.fail(f"must be one of {', '.join(RUN_KINDS)}, not {run!r}", "run")
    name = sweep.get("name", path.stem)
    if not isinstance(name, str) or not name or "/" in name:
        reader.fail(f"must be a non-empty name without '/', not {name!r}", "name")
    targets = (
        _experiment_target(reader, sweep) if run == "experiment" else _block_targets(reader, sweep)
    )
    options = _options(reader, sweep, run)
    points, grid_names = _points(reader, sweep, run, targets)
    metric = sweep.get("metric", HEAT_METRIC[run])
    if metric is not None and not isinstance(metric, str):
        reader.fail(f"must be the name of a result metric, not {metric!r}", "metric")
    return SweepSpec(
        name=name,
        run=run,
        targets=targets,
        points=points,
        options=options,
        path=path,
        grid_names=grid_names,
        metric=metric,
    )
