"""Registry entries: one module per block family; each calls :func:`gpurtl.sim.core.registry.register`."""
