"""Definitions shared by every kernel and by the tests' emulation of the kernels' numerics."""
