"""The engine: scoring, generation and embedding over every local device. Importing it
gives JAX one CPU device per core and babeleval's XLA CPU flags (devices.prepare_cpu), before
any array exists."""
from ..placement.devices import prepare_cpu

prepare_cpu()
