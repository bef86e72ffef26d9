"""Design-space sweeps on Dask: a spec (:mod:`.spec`) names what to run at every point of a
parameter grid -- synthesis, a lockstep check or an experiment's ``measure()`` -- and
:mod:`.run` runs the points as Dask tasks, writing each result to disk as it arrives;
:mod:`.report` writes the table and the report with its plots.
"""

from .report import pareto_front, untimed_datapath, write_report, write_table
from .run import collect, pending, point_key, point_sources, run_point, run_sweep, tool_versions
from .spec import OPTIONS, RUN_KINDS, SpecError, SweepSpec, load_spec, shipped

__all__ = [
    "OPTIONS",
    "RUN_KINDS",
    "SpecError",
    "SweepSpec",
    "collect",
    "load_spec",
    "pareto_front",
    "pending",
    "point_key",
    "point_sources",
    "run_point",
    "run_sweep",
    "shipped",
    "tool_versions",
    "untimed_datapath",
    "write_report",
    "write_table",
]
