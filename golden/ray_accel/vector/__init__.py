"""The vector golden models of the intersect instructions: a wave of lanes at once
(:mod:`.intersect_wave`) and large batches of packed words (:mod:`.batch`), bit-identical to the
scalar model."""
