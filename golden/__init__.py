"""Bit-exact Python/numpy golden models and encoders of gpurtl's blocks."""
