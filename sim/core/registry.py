"""The block registry: one entry per hardware block, naming everything the tools need.

Each block registers its name, parameters, RTL factory, golden model, the layouts of what goes in
and out, a random stimulus generator and its kind:

``"pipeline"``
    An order-preserving transaction pipeline. The RTL is a :class:`wiring.Component` with ports
    ``i: In(stream.Signature(in_layout))`` and ``o: Out(stream.Signature(out_layout))`` and a
    ``latency`` property (cycles from an accepted input to its output with ``o.ready`` held high).
    The golden model is a callable mapping one input dictionary to one output dictionary; it may
    also provide ``batch(list_of_inputs) -> list_of_outputs``.

``"cycle"``
    A cycle-stepped block. The RTL has ports ``i: In(in_layout)`` and ``o: Out(out_layout)``;
    the golden model has ``step(inputs) -> outputs`` and is called once per clock with the same
    inputs. Outputs are read after the inputs are applied and before the clock edge (so they may
    depend combinationally on the inputs), then the clock ticks.

Block modules live in :mod:`gpurtl.sim.blocks`; every module there is imported on first use, so
adding a block never edits a shared file.
"""

from __future__ import annotations

import difflib
import gc
import importlib
import pkgutil
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

#: A parameter's value: what ``Param.parse`` gives (the type of the default).
Value = bool | int | float | str
#: The build parameters of a block, by name.
Params = dict[str, Any]
_T = TypeVar("_T")

__all__ = [
    "Param",
    "Block",
    "RegistryError",
    "register",
    "get",
    "blocks",
    "component_facts",
    "timing_facts",
]


class RegistryError(Exception):
    """A user asked for something the registry does not have (unknown block, bad parameter)."""


@dataclass(frozen=True)
class Param:
    """One build parameter of a block.

    The value type follows ``default`` (``bool``, ``int`` or ``str``). ``choices`` restricts the
    value to a set, ``range`` to an inclusive interval of integers. ``rule`` states, in words, a
    further condition that the block's ``validate`` checks (``"a multiple of 128 x ways"``); a
    value outside ``range`` is refused with the rule beside the range, so that the message says
    which values are valid, not only their bounds.
    """

    name: str
    default: Value
    doc: str = ""
    choices: tuple[Value, ...] | None = None
    range: tuple[int, int] | None = None
    rule: str = ""

    def parse(self, text: object) -> Any:
        """The value of this parameter given as text (or already typed); raises RegistryError."""
        kind = type(self.default)
        value = text
        if isinstance(text, str):
            try:
                if kind is bool:
                    lowered = text.strip().lower()
                    if lowered in ("1", "true", "yes", "on"):
                        value = True
                    elif lowered in ("0", "false", "no", "off"):
                        value = False
                    else:
                        raise ValueError
                elif kind is int:
                    value = int(text, 0)
                elif kind is float:
                    value = float(text)
                else:
                    value = text
            except ValueError:
                raise RegistryError(
                    f"parameter `{self.name}` must be {self._expected()}, not {text!r}"
                ) from None
        elif kind is bool and not isinstance(value, bool):
            raise RegistryError(f"parameter `{self.name}` must be a boolean, not {value!r}")
        self.validate(value)
        return value

    def _expected(self) -> str:
        kind = type(self.default)
        if self.choices is not None:
            return "one of " + ", ".join(
                repr(c) if isinstance(c, str) else str(c) for c in self.choices
            )
        if self.range is not None:
            also = f" and {self.rule}" if self.rule else ""
            return f"an integer from {self.range[0]} to {self.range[1]}{also}"
        return {bool: "a boolean (0/1, true/false)", int: "an integer", float: "a number"}.get(
            kind, "a string"
        )

    def validate(self, value: Any) -> None:
        """Raise :class:`RegistryError` unless ``value`` is one of ``choices`` and in ``range``."""
        if self.choices is not None and value not in self.choices:
            raise RegistryError(
                f"parameter `{self.name}` must be {self._expected()}, not {value!r}"
            )
        if self.range is not None and not (self.range[0] <= value <= self.range[1]):
            raise RegistryError(
                f"parameter `{self.name}` must be {self._expected()}, not {value!r}"
            )

    def summary(self) -> str:
        """``name=default (allowed values)``, as ``gpurtl list`` prints it."""
        if self.choices is not None:
            allowed = "|".join(str(c) for c in self.choices)
        elif self.range is not None:
            allowed = f"{self.range[0]}..{self.range[1]}"
        else:
            allowed = type(self.default).__name__
        return f"{self.name}={self.default} ({allowed})"


@dataclass(frozen=True)
class Block:
    """A registered hardware block. See the module doc string for the two kinds.

    Parameters
    ----------
    name : str
        Registry name (lower case, ``_`` separated), also the Verilog top-level module name.
    doc : str
        One-line description.
    kind : str
        ``"pipeline"`` or ``"cycle"``.
    build : callable
        ``build(**params) -> wiring.Component``.
    golden : callable
        ``golden(**params) -> model`` (see the module doc string).
    layouts : callable
        ``layouts(**params) -> (in_layout, out_layout)``.
    stimulus : callable
        ``stimulus(rng, count, **params) -> list of input dictionaries``: random transactions
        (pipelines) or per-cycle inputs (cycle blocks), including the corner cases.
    params : tuple of Param
    defaults : callable, optional
        ``defaults(**params) -> dict``: values used for input fields a JSON line leaves out.
        Fields without a default must be given.
    validate : callable, optional
        ``validate(**params)`` raising ValueError for combinations that do not make sense.
    check_count : int
        Default ``--count`` of ``gpurtl check``.
    small : dict, optional
        Parameter overrides that give a small, quickly built and simulated variant (the registry
        smoke test uses them); empty when the defaults are already small.
    check : dict, optional
        Parameter overrides that ``gpurtl check`` and the lockstep tests apply unless the user
        sets the parameter: simulation-only checks (``assertions=True``) that the defaults, which
        are what ``export`` and ``synth`` build, leave out.
    stimulus_words : callable, optional
        ``stimulus_words(rng, count, **params) -> (count, W_in) uint32`` word array (rows packed
        as :func:`gpurtl.sim.core.layouts.pack` does, little-endian 32-bit words): fast stimulus for
        long runs.
    golden_words : callable, optional
        ``golden_words(words, **params) -> (count, W_out) uint32``: the golden model on a whole
        word array at once.
    notes : callable, optional
        ``notes(**params) -> {"in": {field: text}, "out": {field: text}}``: what a field's values
        mean where its type does not say: the members of an integer that selects one of several
        things (``op``: ``0 v_wmma_..., 1 v_swmmac_...``), the registers an operation leaves
        unused. A field is named by its path or by the end of its path (``heuristic`` names
        ``desc.heuristic`` and ``inst.payload.desc.heuristic``); see :meth:`field_notes`.
    presets : dict, optional
        ``{name: {parameter: value}}``: named builds. A block with presets has a ``preset``
        parameter (default ``"none"``); :meth:`resolve` applies the named preset's values over
        the defaults and the other given parameters over the preset, so ``-p preset=rdna4 -p
        mshrs=8`` is the preset with 8 MSHRs.
    """

    name: str
    doc: str
    kind: str
    build: Callable[..., Any]
    golden: Callable[..., Any]
    layouts: Callable[..., tuple[Any, Any]]
    stimulus: Callable[..., list[dict[str, Any]]]
    params: tuple[Param, ...] = ()
    defaults: Callable[..., Mapping[str, Any]] | None = None
    validate: Callable[..., None] | None = None
    check_count: int = 1000
    small: dict[str, Any] = field(default_factory=dict)
    check: dict[str, Any] = field(default_factory=dict)
    stimulus_words: Callable[..., Any] | None = None
    golden_words: Callable[..., Any] | None = None
    notes: Callable[..., dict[str, dict[str, str]]] | None = None
    presets: dict[str, dict[str, Any]] = field(default_factory=dict)

    def field_notes(self, params: Params) -> dict[str, dict[str, str]]:
        """``{"in": {path: text}, "out": {path: text}}``: the :attr:`notes` of the block built
        with ``params``, on the full paths of the fields they name (every field whose path is a
        note's name or ends with ``.`` and the name), in layout order."""
        from . import layouts

        given = self.notes(**params) if self.notes else {}
        result: dict[str, dict[str, str]] = {}
        for side, shape in zip(("in", "out"), self.layouts(**params)):
            paths: dict[
                str, None
            ] = {}  # every field's path, its enclosing ones first, in layout order
            for leaf in layouts.leaves(shape):
                parts = leaf.path.replace("[", ".[").split(".")
                for end in range(1, len(parts) + 1):
                    paths.setdefault(".".join(parts[:end]).replace(".[", "["), None)
            notes = given.get(side, {})
            result[side] = {
                path: text
                for path in paths
                for name, text in notes.items()
                if path == name or path.endswith("." + name)
            }
        return result

    def __post_init__(self) -> None:
        if self.kind not in ("pipeline", "cycle"):
            raise ValueError(f"`kind` must be 'pipeline' or 'cycle', not {self.kind!r}")
        if self.presets:
            names = {p.name for p in self.params}
            if "preset" not in names:
                raise ValueError(f"block `{self.name}` has presets but no `preset` parameter")
            for preset, values in self.presets.items():
                unknown = sorted(set(values) - names)
                if unknown:
                    raise ValueError(
                        f"preset `{preset}` of block `{self.name}` sets unknown parameters "
                        f"{', '.join(unknown)}"
                    )

    def param(self, name: str) -> Param:
        """The parameter called ``name``; raises :class:`RegistryError` naming the known ones."""
        for p in self.params:
            if p.name == name:
                return p
        known = ", ".join(p.name for p in self.params) or "none"
        raise RegistryError(f"block `{self.name}` has no parameter `{name}` (parameters: {known})")

    def resolve(self, overrides: Mapping[str, object] | None = None) -> Params:
        """Full parameter dictionary: defaults updated with ``overrides`` (text or typed values)."""
        values = {p.name: p.default for p in self.params}
        overrides = dict(overrides or {})
        if self.presets and "preset" in overrides:
            values["preset"] = self.param("preset").parse(overrides.pop("preset"))
            values.update(self.presets.get(str(values["preset"]), {}))
        for name, text in overrides.items():
            values[name] = self.param(name).parse(text)
        if self.validate is not None:
            try:
                self.validate(**values)
            except ValueError as error:
                raise RegistryError(f"block `{self.name}`: {error}") from None
        return values

    def small_params(self) -> Params:
        """Full parameter dictionary of the small variant (see ``small``)."""
        return self.resolve(self.small)

    def check_params(self, overrides: Mapping[str, object] | None = None) -> Params:
        """Full parameter dictionary for a lockstep check: :meth:`resolve` of ``check`` updated
        with ``overrides``."""
        return self.resolve({**self.check, **(overrides or {})})

    def input_defaults(self, params: Params) -> dict[str, Any]:
        """The values of the input fields a JSON line may leave out (``defaults``), or ``{}``."""
        return dict(self.defaults(**params)) if self.defaults is not None else {}


_blocks: dict[str, Block] = {}
_loaded = False


def register(block: Block) -> Block:
    """Add ``block`` to the registry (called by the modules in :mod:`gpurtl.sim.blocks`)."""
    if block.name in _blocks:
        raise ValueError(f"block `{block.name}` is registered twice")
    _blocks[block.name] = block
    return block


def _load() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    from .. import blocks as package

    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
        importlib.import_module(f"{package.__name__}.{info.name}")


def blocks() -> list[Block]:
    """All registered blocks, sorted by name."""
    _load()
    return [_blocks[name] for name in sorted(_blocks)]


def _load_one(name: str) -> None:
    """Import the block module named like block ``name``, where there is one: ``get`` of such a
    block (most are) needs no other block module, which keeps a command's start-up short."""
    from .. import blocks as package

    if name.isidentifier() and (Path(package.__path__[0]) / f"{name}.py").is_file():
        importlib.import_module(f"{package.__name__}.{name}")


def get(name: str) -> Block:
    """The block called ``name``; raises RegistryError with close matches otherwise."""
    if name not in _blocks and not _loaded:
        _load_one(name)
    if name not in _blocks:
        _load()
    try:
        return _blocks[name]
    except KeyError:
        close = difflib.get_close_matches(name, _blocks, n=3)
        hint = (
            f"; did you mean {', '.join(close)}?"
            if close
            else f"; known blocks: {', '.join(sorted(_blocks))}"
        )
        raise RegistryError(f"unknown block `{name}`{hint}") from None


def component_facts(build: Callable[[], Any], read: Callable[[Any], _T]) -> _T:
    """``read(component)`` of the component ``build()`` makes, for facts that the constructor
    works out (latency, initiation interval, ``details``) without simulating or exporting it.

    The component is then dropped without being elaborated (elaborating the full ray accelerator
    takes seconds). Amaranth warns about components that are built and never used, which is a
    mistake everywhere else, so the warning is left out for this component tree only.
    """
    from amaranth.hdl import UnusedElaboratable

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)
        component = build()
        try:
            return read(component)
        finally:
            del component
            gc.collect()  # the tree holds reference cycles: drop it while the filter holds


def timing_facts(block: Block, params: Params) -> tuple[Any, Any]:
    """``(latency, initiation_interval)`` a pipeline block's build declares (an initiation
    interval of 1 when it declares none, ``None`` when it declares that the interval varies
    from one transaction to the next: not checked); ``(None, None)`` for a cycle-stepped
    block."""
    if block.kind != "pipeline":
        return None, None
    return component_facts(
        lambda: block.build(**params),
        lambda dut: (dut.latency, getattr(dut, "initiation_interval", 1)),
    )
