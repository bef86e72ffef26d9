"""The tools layer of ``sim``: the command line, benchmarks, synthesis, boards, the demo and
the helpers they share; it may import every other part of ``sim``."""
