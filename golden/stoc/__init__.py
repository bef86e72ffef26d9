"""Golden models of the Xe3 sub-triangle opacity culling (STOC) and opacity-micromap blocks.

:mod:`.index` maps FP32 barycentrics to micro-triangle indices; :mod:`.classify` decodes STOC1 /
STOC3 leaf bits and opacity-micromap data into a state and the action taken on a candidate hit.
"""
