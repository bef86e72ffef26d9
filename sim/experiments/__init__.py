"""Experiments that reproduce, on the RTL, what the source articles describe.

Each module here defines ``NAME`` (the CLI name), ``DESCRIPTION`` and
``run(out_dir, *, quick=False, progress=None) -> dict`` returning
``{"title": str, "rows": [(metric, value), ...], "files": [paths]}``; it writes its plots, CSV
files and a ``summary.md`` into ``out_dir``. ``progress(done, total, what)`` reports progress.
"""

import importlib
import pkgutil

__all__ = ["experiments", "get"]


def experiments():
    """``{name: module}`` of every experiment, sorted by name."""
    found = {}
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        if hasattr(module, "NAME") and hasattr(module, "run"):
            found[module.NAME] = module
    return dict(sorted(found.items()))


def get(name):
    found = experiments()
    if name not in found:
        from ..core.registry import RegistryError

        raise RegistryError(
            f"unknown experiment `{name}`; known experiments: {', '.join(found) or 'none'}"
        )
    return found[name]
