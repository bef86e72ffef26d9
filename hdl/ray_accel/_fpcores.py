"""Look up the FP32 cores of :mod:`gpurtl.hdl.fp32` by class name (FPAddCore, FPMulCore,
FPFMACore, FPCmpCore, FPRcpCore), whichever module of the package defines them."""

import importlib
import pkgutil

__all__ = ["fp_core"]

_cache = {}


def fp_core(name):
    """The class ``name`` from the FP32 core package; ``ImportError`` if it does not exist yet."""
    if name in _cache:
        return _cache[name]
    package = importlib.import_module("gpurtl.hdl.fp32")
    if hasattr(package, name):
        _cache[name] = getattr(package, name)
        return _cache[name]
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        if hasattr(module, name):
            _cache[name] = getattr(module, name)
            return _cache[name]
    raise ImportError(f"gpurtl.hdl.fp32 has no `{name}` (yet)")
