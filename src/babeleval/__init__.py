"""babeleval: evaluate language models on multilingual and low-resource benchmarks, fast."""

__version__ = "0.1.0"
