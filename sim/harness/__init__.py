"""The simulation harness: drivers, stall patterns, reports, golden I/O and lockstep checking,
written against the :class:`~gpurtl.sim.harness.backend.Backend` interface."""
