"""Register allocators: RDNA 4 dynamic VGPR blocks, RDNA static VGPRs, Intel Xe3 GRF blocks."""
