"""Facts shared by the RTL (:mod:`gpurtl.hdl`) and the golden models (:mod:`gpurtl.golden`).

Bit layouts, enumerations, widths, constants and published tables, one module per block family.
Both sides import from here; this package imports neither of them (``tests/test_layers.py``).
"""
