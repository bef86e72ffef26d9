"""Example sweep specs shipped with the package (``gpurtl sweep NAME``); see
:mod:`gpurtl.sim.sweep` for the format."""
