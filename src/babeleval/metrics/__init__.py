"""Text metrics: Python wrappers (lists of strings in, numbers out) over babeleval.kernels."""
