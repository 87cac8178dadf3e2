"""babeleval: evaluate language models on multilingual and low-resource benchmarks, fast."""

from .engine.devices import split_cpu_cores

__version__ = "0.1.0"

split_cpu_cores()
