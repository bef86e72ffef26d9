"""``gpurtl encode waitcnt`` / ``gpurtl decode waitcnt``: wait instructions as text and as words.

A wait instruction is written as the assembler writes it, for one generation's profile
(:mod:`gpurtl.facts.waitcnt`):

* a form with one count: ``s_wait_loadcnt 0`` (GFX12), ``s_waitcnt_vscnt null, 0`` (the SOPK
  forms of GFX10/GFX11; ``null,`` may be left out); the count is 0 to 65535 (the counter
  saturates at its maximum, so a count at or above it does not wait);
* a form with several counts: either the raw 16-bit immediate (``s_wait_loadcnt_dscnt 0``,
  ``s_waitcnt 0x3f70``) or the counts by name, in any order, those left out not waited for
  (``s_waitcnt vmcnt(0) lgkmcnt(0)``, ``s_wait_loadcnt_dscnt loadcnt(1) dscnt(0)``; ``&`` or
  ``,`` between them as LLVM accepts).

The word is the 32-bit instruction (SOPP: ``0x17F`` in bits 31-23, the opcode in 22-16 and the
immediate in 15-0; SOPK: ``0xB`` in 31-28, the opcode in 27-23, ``null`` in 22-16), what the
``wait.word`` field of the ``waitcnt`` blocks takes. :func:`decode_word` writes a word back as
text in the same syntax, counts by name (a word with bits outside its fields as the raw
immediate), so that ``encode_text(decode_word(w)) == w`` for every wait word.
"""

from __future__ import annotations

import re

from gpurtl.facts.waitcnt import Profile, WaitField, WaitForm
from gpurtl.facts.waitcnt import profile as get_profile

__all__ = ["WaitTextError", "count_name", "decode_word", "encode_text"]

#: The null SGPR's operand code in a SOPK wait (``s_waitcnt_vscnt null, N``).
_NULL = 0x7C


class WaitTextError(ValueError):
    """A wait instruction's text or word that the profile does not have."""


def count_name(field: WaitField) -> str:
    """The assembler's name of one count field of a wait immediate: ``vmcnt``, ``lgkmcnt``,
    ``expcnt``, ``loadcnt``, ``dscnt``, ... (a field shared by several GFX12 counters is named as
    on GFX11: ``s_waitcnt``'s ``vmcnt`` and ``lgkmcnt``)."""
    shared = {("ds", "km"): "lgkm", ("load", "sample", "bvh"): "vm"}
    return shared.get(tuple(field.counters), field.counters[0]) + "cnt"


def _number(text: str, what: str) -> int:
    try:
        value = int(text, 0)
    except ValueError:
        raise WaitTextError(f"{what} must be an integer, not {text!r}") from None
    if not 0 <= value <= 0xFFFF:
        raise WaitTextError(f"{what} must be in 0..65535, not {value}")
    return value


def _form(prof: Profile, name: str) -> WaitForm:
    try:
        return prof.wait(name)
    except KeyError:
        known = ", ".join(form.name for form in prof.waits)
        raise WaitTextError(
            f"`{name}` is not a wait instruction of {prof.name} (known: {known})"
        ) from None


def _word(form: WaitForm, simm16: int) -> int:
    if form.fmt == "sopp":
        return (0x17F << 23) | (form.opcode << 16) | simm16
    return (0xB << 28) | (form.opcode << 23) | (_NULL << 16) | simm16


def encode_text(text: str, generation: str = "gfx12") -> int:
    """The 32-bit word of the wait instruction ``text`` on ``generation`` (module doc string);
    raises :class:`WaitTextError` with what was expected."""
    prof = get_profile(generation)
    parts = text.strip().split(None, 1)
    if not parts:
        raise WaitTextError("a wait instruction must not be empty")
    form = _form(prof, parts[0].lower())
    operands = parts[1].strip() if len(parts) > 1 else ""
    if form.fmt == "sopk":
        operands = re.sub(r"^null\s*,\s*", "", operands, flags=re.IGNORECASE)
    if not operands:
        raise WaitTextError(f"`{form.name}` needs a count (e.g. `{form.name} 0`)")
    named = re.findall(r"([a-z_]+)\s*\(\s*([^)]*?)\s*\)", operands.lower())
    if not named:
        return _word(form, _number(operands, f"the immediate of `{form.name}`"))
    if len(form.fields) == 1 and form.fmt == "sopk":
        raise WaitTextError(f"`{form.name}` takes one count, not {operands!r}")
    rest = re.sub(r"[a-z_]+\s*\([^)]*\)", "", operands.lower()).replace("&", "").replace(",", "")
    if rest.strip():
        raise WaitTextError(f"cannot read {rest.strip()!r} in `{text.strip()}`")
    fields = {count_name(field): field for field in form.fields}
    counts = {}
    for name, value in named:
        if name not in fields:
            raise WaitTextError(
                f"`{form.name}` on {prof.name} has the counts {', '.join(fields)}, not `{name}`"
            )
        field = fields[name]
        top = (1 << (field.lo_bits + field.hi_bits)) - 1
        number = _number(value, f"`{name}`")
        if number > top:
            raise WaitTextError(f"`{name}` must be in 0..{top} on {prof.name}, not {number}")
        counts[field.counters[0]] = number
    return form.encode(**counts)


def decode_word(word: int, generation: str = "gfx12") -> str:
    """The text of the wait instruction ``word`` on ``generation`` (module doc string); raises
    :class:`WaitTextError` for a word that is no wait instruction of the profile."""
    prof = get_profile(generation)
    if not isinstance(word, int) or not 0 <= word <= 0xFFFFFFFF:
        raise WaitTextError(f"a wait word must be a 32-bit unsigned integer, not {word!r}")
    for form in prof.waits:
        if not form.matches(word):
            continue
        simm16 = word & 0xFFFF
        if form.fmt == "sopk":
            if (word >> 16) & 0x7F != _NULL:
                raise WaitTextError(
                    f"0x{word:08x} is `{form.name}` with an SGPR operand other than null, "
                    "which the model does not read"
                )
            return f"{form.name} null, {simm16}"
        if len(form.fields) == 1:
            return f"{form.name} {simm16}"
        terms = []
        # LLVM's order: vmcnt, expcnt, lgkmcnt; the GFX12 forms in their own field order
        order = ("vmcnt", "expcnt", "lgkmcnt")
        for field in sorted(
            form.fields, key=lambda f: order.index(count_name(f)) if count_name(f) in order else -1
        ):
            top = (1 << (field.lo_bits + field.hi_bits)) - 1
            value = field.extract(simm16)
            if value != top:  # all ones: no wait on this counter, left out as LLVM does
                terms.append(f"{count_name(field)}({value})")
        text = f"{form.name} {' '.join(terms)}" if terms else f"{form.name} 0x{simm16:04x}"
        if encode_text(text, generation) != word:  # bits outside the fields: keep them all
            text = f"{form.name} 0x{simm16:04x}"
        return text
    known = ", ".join(form.name for form in prof.waits)
    raise WaitTextError(f"0x{word:08x} is not a wait instruction of {prof.name} ({known})")
