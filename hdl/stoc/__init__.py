"""Amaranth RTL of the Xe3 sub-triangle opacity culling (STOC) and opacity-micromap blocks."""
