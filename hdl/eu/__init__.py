"""Intel Gen execution unit: thread issue with a register scoreboard, dual issue, a register
read port, the extended-math unit and a data-port latency model."""

from .issue import EuIssue, eu_layouts

__all__ = ["EuIssue", "eu_layouts"]
