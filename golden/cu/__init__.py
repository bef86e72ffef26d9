"""Cycle model of one compute unit running the ray-tracing loop (see :mod:`.model`)."""

from .model import CuParams, CuRun, WaveTrace, article_utilization, simulate

__all__ = ["CuParams", "CuRun", "WaveTrace", "article_utilization", "simulate"]
