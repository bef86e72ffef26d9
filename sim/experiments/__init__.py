"""Experiments that reproduce, on the RTL, what the source articles describe.

Each module here defines (a package of experiments lists its further experiment modules in
``EXPERIMENTS``, names of its submodules)

* ``NAME`` (the CLI name) and ``DESCRIPTION``;
* ``measure(*, quick=False, progress=None, **params) -> data``: the simulation, returning plain
  JSON data (dicts, lists, strings, numbers); ``progress(done, total, what)`` reports progress.
  An experiment that ``gpurtl sweep`` can run point by point lists the parameters of a point in
  ``PARAMS`` (name -> (default, meaning)) and what a point returns in ``METRICS``; called with a
  point's parameters, ``measure`` returns that point's metrics;
* ``report(data, out_dir) -> {"title": str, "rows": [(metric, value), ...], "files": [paths]}``:
  tables (through :mod:`gpurtl.sim.tools.tables`), CSV files, plots and a ``summary.md`` in ``out_dir``,
  from ``data`` alone;
* optionally ``SEEDS``: ``{what: seed}`` of the fixed seeds its random numbers come from (``{}``
  when it draws none), recorded in the run's provenance;
* optionally ``IN_DEMO = False``: ``gpurtl demo`` leaves the experiment out (its quick run
  still takes minutes);
* optionally ``arguments(parser)``: the experiment's own options of ``gpurtl experiment NAME``
  (``parser.add_argument`` as argparse has it; every option's default must be ``None`` or
  ``argparse.SUPPRESS``, meaning "not given"), passed to ``measure`` as keyword arguments when given, and
  ``check_options(options)``, which raises ``ValueError`` for a bad value before any work starts;
* optionally ``STORE = True``: ``measure`` also takes ``store``, the folder ``OUT/NAME.store``
  beside the output folder, which an interrupted run leaves in place (a resumable experiment
  keeps its finished parts there).

:func:`run` is ``report(measure(...), out_dir)`` for every experiment and keeps the data as
``data.json`` beside the report, so :func:`report` can write the report again without measuring.
``data.json`` also holds the run's provenance (:mod:`gpurtl.sim.core.provenance`: version,
commit, command line, seeds, tool versions, machine) under ``"provenance"``, and ``summary.md``
ends with it; :func:`report` keeps the provenance of the run that measured.
A module that defines only ``run(out_dir, *, quick=False, progress=None)`` is run as it is and
keeps no data.
"""

import importlib
import json
import pkgutil
from pathlib import Path

from ..core.provenance import markdown, provenance

__all__ = [
    "DATA",
    "PROVENANCE",
    "ExperimentFailed",
    "check_params",
    "dumps",
    "experiments",
    "get",
    "report",
    "run",
    "run_provenance",
]

#: The file, in an experiment's output folder, that holds what ``measure()`` returned.
DATA = "data.json"


def experiments():
    """``{name: module}`` of every experiment, sorted by name."""
    found = {}
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        named = [module] + [
            importlib.import_module(f"{module.__name__}.{sub}")
            for sub in getattr(module, "EXPERIMENTS", ())
        ]
        for each in named:
            if hasattr(each, "NAME") and (_has_data(each) or hasattr(each, "run")):
                found[each.NAME] = each
    return dict(sorted(found.items()))


def get(name):
    found = experiments()
    if name not in found:
        from ..core.registry import RegistryError

        raise RegistryError(
            f"unknown experiment `{name}`; known experiments: {', '.join(found) or 'none'}"
        )
    return found[name]


def _has_data(module):
    return hasattr(module, "measure") and hasattr(module, "report")


class ExperimentFailed(RuntimeError):
    """An experiment found an error in what it measured (e.g. an RTL output that differs from
    its golden model); ``gpurtl experiment`` prints it in one line and exits 1."""


def run(module, out_dir, *, quick=False, progress=None, options=None):
    """Measure ``module`` and write its report into ``out_dir``, with the data as ``data.json``.
    ``options``: the experiment's own options that were given (module doc string).

    The report is made from the data as read back from JSON, so a later :func:`report` of the same
    folder writes the same tables."""
    out_dir = Path(out_dir)
    if not _has_data(module):
        return module.run(out_dir, quick=quick, progress=progress)
    options = dict(options or {})
    if getattr(module, "STORE", False):
        # beside out_dir (a staging folder is its sibling): kept when the run is interrupted
        options["store"] = out_dir.parent / f"{module.NAME}.store"
    data = module.measure(quick=quick, progress=progress, **options)
    if isinstance(data, dict):
        data = {**data, PROVENANCE: run_provenance(module)}
    text = dumps(data)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / DATA).write_text(text + "\n")
    return _with_data_file(_reported(module, json.loads(text), out_dir), out_dir)


#: The key of ``data.json`` that holds the run's provenance.
PROVENANCE = "provenance"


def run_provenance(module):
    """The provenance of a run of ``module``, with its ``SEEDS`` (``"not declared"`` without)."""
    return provenance(seeds=getattr(module, "SEEDS", "not declared"))


def _reported(module, data, out_dir):
    """``module.report(data, out_dir)``, with the provenance kept in ``data.json`` added to the
    end of ``summary.md`` (the report functions read their own keys only)."""
    record = data.pop(PROVENANCE, None) if isinstance(data, dict) else None
    result = module.report(data, out_dir)
    summary = Path(out_dir) / "summary.md"
    if record and summary.exists():
        text = summary.read_text().rstrip("\n")
        summary.write_text(f"{text}\n\n{markdown(record)}")
    return result


def report(module, out_dir, data_dir=None):
    """Write ``module``'s report into ``out_dir`` from the ``data.json`` in ``data_dir`` (default:
    ``out_dir``) without measuring; raises ``FileNotFoundError`` naming the missing file."""
    out_dir = Path(out_dir)
    source = Path(data_dir if data_dir is not None else out_dir) / DATA
    if not _has_data(module):
        raise FileNotFoundError(f"experiment `{module.NAME}` keeps no {DATA}; run it again")
    text = source.read_text()
    out_dir.mkdir(parents=True, exist_ok=True)
    if source != out_dir / DATA:
        (out_dir / DATA).write_text(text)
    return _with_data_file(_reported(module, json.loads(text), out_dir), out_dir)


def dumps(data):
    """``data`` as JSON text: one key per line, a list of numbers or strings on one line (the
    per-cycle series stay compact); numpy scalars and arrays as plain numbers and lists."""

    def plain(value):
        if hasattr(value, "tolist"):  # numpy scalars and arrays
            return value.tolist()
        raise TypeError(f"{type(value).__name__} is not plain data: {value!r}")

    def write(value, indent):
        if isinstance(value, dict):
            if not value:
                return "{}"
            inner = " " * (indent + 1)
            items = [
                f"{inner}{json.dumps(str(k))}: {write(v, indent + 1)}" for k, v in value.items()
            ]
            return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"
        if isinstance(value, (list, tuple)) and any(
            isinstance(v, (dict, list, tuple)) for v in value
        ):
            inner = " " * (indent + 1)
            items = [inner + write(v, indent + 1) for v in value]
            return "[\n" + ",\n".join(items) + "\n" + " " * indent + "]"
        return json.dumps(value, default=plain)

    return write(json.loads(json.dumps(data, default=plain)), 0)


def _with_data_file(result, out_dir):
    result = dict(result)
    result["files"] = [str(path) for path in result.get("files", [])] + [str(out_dir / DATA)]
    return result


def check_params(name, params, known=()):
    """Raise ``ValueError`` if ``params`` names a parameter that experiment ``name`` does not
    take (``known``)."""
    unknown = sorted(set(params) - set(known))
    if unknown:
        takes = f"takes {', '.join(known)}" if known else "takes no parameters"
        raise ValueError(f"experiment `{name}` {takes}; not {', '.join(unknown)}")
