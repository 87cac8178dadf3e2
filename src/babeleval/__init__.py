"""babeleval: evaluate language models on multilingual and low-resource benchmarks, fast.

Importing the package, a task or a metric starts nothing: JAX is imported (and given its
CPU devices) only by the engine, the models and the loaders."""

__version__ = "0.1.0"
