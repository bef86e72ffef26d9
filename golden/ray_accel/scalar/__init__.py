"""The scalar golden model of the intersect instructions: one instruction at a time
(:func:`.intersect.intersect`), built from one module per part of the work (box test, sort,
triangle test, transforms) and the references of the RTL's components (decode, ray setup,
result format)."""
