"""The engine: scoring, generation and embedding over every local device. Importing it
gives JAX one CPU device per core (devices.split_cpu_cores), before any array exists."""
from ..placement.devices import split_cpu_cores

split_cpu_cores()
