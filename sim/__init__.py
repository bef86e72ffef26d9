"""Simulation harness, registry, runners, CLI and experiments of gpurtl."""
