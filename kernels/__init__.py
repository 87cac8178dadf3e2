"""Numba kernels over encoded text: pure functions on numpy arrays, no JAX, no tasks."""
