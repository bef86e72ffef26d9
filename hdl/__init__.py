"""Amaranth RTL of gpurtl's blocks (RTL only: no simulation or golden code lives here)."""
