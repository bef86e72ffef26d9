"""Named arithmetic presets (defined in :mod:`gpurtl.facts.matrix`, shared with the RTL).

See :data:`gpurtl.facts.matrix.PRESETS_DOC` for what each preset stands for and which of its
parameters are choices.
"""

from gpurtl.facts.matrix import DEFAULT_PRESET, INPUT_CLASSES, PRESETS, PRESETS_DOC, Preset, preset

__all__ = ["Preset", "PRESETS", "DEFAULT_PRESET", "preset", "INPUT_CLASSES", "PRESETS_DOC"]
