"""Encoders of the intersect instructions' inputs: the operands (ray, descriptor, pointer flags),
the box and primitive node formats (with the decoders the models share) and small test meshes."""
