"""Quantized weights: the block layouts (layouts.py), their dequantization (blocks.py) and the
QArray a model holds (qarray.py). Below models, placement and loading: all three read it."""
from .layouts import LAYOUTS
from .qarray import ORDER, QArray, QStack, dense, from_blocks, is_quantized

__all__ = ["LAYOUTS", "ORDER", "QArray", "QStack", "dense", "from_blocks", "is_quantized"]
