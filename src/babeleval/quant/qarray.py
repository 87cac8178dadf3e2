"""A quantized weight as data in the model: its fields (code planes as stored, block scales, a
per-block minimum where the layout has one; layouts.py) and the dense array it stands for.

Fields are [*lead, rows, blocks, ...]: rows the stored rows (a torch Linear's outputs, an
embedding's vocabulary), blocks running along the stored row (the inputs), lead the experts of a
stacked mixture. `shape` is the dense parameter's (a flax kernel [in, out]: `transposed`, the
stored [out, in] swapped). A JAX pytree: placed, sharded and passed to jit as its fields; the
model dequantizes it inside the jitted forward just before its matmul (models/weights.py)."""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from .blocks import dequantize_blocks


@jax.tree_util.register_pytree_node_class
class QArray:
    def __init__(self, fields: dict, layout: str, shape: tuple, transposed: bool = False, core: int | None = None):
        self.fields, self.layout, self.shape, self.transposed = fields, layout, tuple(shape), transposed
        first = fields[min(fields)] if fields else None
        # a field's axes after the leading ones (experts, stacked layers): rows, blocks, bytes ...
        self.core = core if core is not None or not hasattr(first, "ndim") else first.ndim - (len(self.shape) - 2)

    def tree_flatten(self):
        keys = tuple(sorted(self.fields))
        return tuple(self.fields[k] for k in keys), (keys, self.layout, self.shape, self.transposed, self.core)

    @classmethod
    def tree_unflatten(cls, aux, children):
        """Leading axes follow the fields: a scan's slice of a stacked QArray (one layer of
        [layers, ...]) or a stack of QArrays has the shape its fields have."""
        keys, layout, shape, transposed, core = aux
        now = getattr(children[0], "shape", None) if children else None
        if core is not None and isinstance(now, tuple):
            shape = tuple(now[:len(now) - core]) + shape[-2:]
        return cls(dict(zip(keys, children)), layout, shape, transposed, core)

    def __repr__(self):
        return f"QArray({self.layout}, shape={self.shape}{', transposed' if self.transposed else ''})"

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:  # the dense parameter's elements
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:  # what is held
        return sum(int(np.prod(f.shape)) * np.dtype(f.dtype).itemsize for f in self.fields.values())

    @property
    def stored_shape(self) -> tuple:
        return self.shape[:-2] + self.shape[:-3:-1] if self.transposed else self.shape

    @property
    def block_size(self) -> int:
        """Elements per block (a K-quant's super-block)."""
        from .layouts import LAYOUTS

        plane = LAYOUTS[self.layout].planes[0]
        return self.fields[plane.field].shape[-1] * 8 // plane.bits

    @property
    def bits(self) -> float:
        return 8 * self.nbytes / self.size

    def swap(self) -> "QArray":
        """The dense array's last two axes swapped (a torch Linear's [out, in] -> a kernel's [in, out])."""
        return QArray(self.fields, self.layout, self.shape[:-2] + self.shape[:-3:-1], not self.transposed)

    @property
    def T(self) -> "QArray":
        return self.swap()

    def transpose(self, *axes) -> "QArray":
        """Only the last two axes swap (a stacked [experts, out, in] -> [experts, in, out])."""
        if tuple(axes) != tuple(range(self.ndim - 2)) + (self.ndim - 1, self.ndim - 2):
            raise ValueError(f"a QArray swaps its last two axes only, not {axes}")
        return self.swap()

    def split_rows(self, sections) -> list:
        """np.split along the stored rows (a fused qkv or gate-up tensor's parts)."""
        rows = self.stored_shape[-2]
        cuts = [rows // sections * i for i in range(1, sections)] if isinstance(sections, int) else list(sections)
        return [self.rows(slice(a, b)) for a, b in zip([0] + cuts, cuts + [rows])]

    def rows(self, index) -> "QArray":
        """The stored rows at `index` (a slice or integer array: a permutation, a split)."""
        axis = len(self.shape) - 2
        fields = {k: np.asarray(v)[(slice(None),) * axis + (index,)] for k, v in self.fields.items()}
        stored = self.stored_shape
        stored = stored[:axis] + (next(iter(fields.values())).shape[axis],) + stored[axis + 1:]
        out = QArray(fields, self.layout, stored)
        return out.swap() if self.transposed else out

    def dequantize(self, dtype=jnp.float32, xp=jnp):
        """The dense array (inside jit: a fused computation before its matmul)."""
        stored = dequantize_blocks(self.layout, self.fields, xp)
        stored = stored.reshape(self.stored_shape)
        return (stored.swapaxes(-1, -2) if self.transposed else stored).astype(dtype)

    def take(self, ids, dtype=jnp.float32):
        """Rows `ids` of an embedding table (not transposed), dequantized: [*ids.shape, dim]."""
        fields = {k: jnp.take(v, ids, axis=0) for k, v in self.fields.items()}
        return dequantize_blocks(self.layout, fields).astype(dtype)


def is_quantized(x) -> bool:
    return isinstance(x, (QArray, QStack))


def dense(x, dtype=None):
    """x as a dense array: a QArray dequantized, anything else as it is (cast to dtype if given)."""
    if is_quantized(x):
        return x.dequantize(dtype or jnp.float32)
    return x if dtype is None else x.astype(dtype)


def from_blocks(layout: str, raw: np.ndarray, shape: tuple) -> QArray:
    """A tensor's stored bytes [..., rows, row bytes] as a QArray of its stored (dense) shape."""
    from .layouts import split_blocks

    return QArray(split_blocks(layout, raw), layout, shape)


@jax.tree_util.register_pytree_node_class
class QStack:
    """A stacked weight ([layers, ...]) whose layers are held in different layouts (a GGUF that
    stores a few layers' tensors in a wider block type): a full-length QArray per layout, the
    layers of other layouts left zero, and `which` [layers], the part holding each layer. Inside a
    scan (one layer: `which` a scalar) dequantizing switches to that part's blocks only."""

    def __init__(self, parts: dict, which):
        self.parts, self.which = parts, which

    def tree_flatten(self):
        keys = tuple(self.parts)  # in the order the layouts came: `which` indexes it
        return (tuple(self.parts[k] for k in keys), self.which), keys

    @classmethod
    def tree_unflatten(cls, keys, children):
        parts, which = children
        return cls(dict(zip(keys, parts)), which)

    def __repr__(self):
        return f"QStack({self.layout}, shape={self.shape})"

    @property
    def _first(self) -> QArray:
        return next(iter(self.parts.values()))

    shape = property(lambda self: self._first.shape)
    ndim = property(lambda self: self._first.ndim)
    size = property(lambda self: self._first.size)
    transposed = property(lambda self: self._first.transposed)
    block_size = property(lambda self: self._first.block_size)
    layout = property(lambda self: "+".join(sorted(self.parts)))

    @property
    def fields(self) -> dict:
        """Every part's fields (named layout.field) and `which`: what is held."""
        out = {f"{name}.{k}": v for name, part in self.parts.items() for k, v in part.fields.items()}
        return dict(out, which=self.which)

    @property
    def nbytes(self) -> int:
        return sum(int(np.prod(f.shape)) * np.dtype(f.dtype).itemsize for f in self.fields.values())

    @property
    def bits(self) -> float:
        return 8 * self.nbytes / self.size

    def dequantize(self, dtype=jnp.float32, xp=jnp):
        parts = list(self.parts.values())
        if xp is jnp and jnp.ndim(self.which) == 0:  # one layer, inside the scan
            return jax.lax.switch(self.which, [lambda p=p: p.dequantize(dtype) for p in parts])
        which = xp.asarray(self.which).reshape(np.shape(self.which) + (1,) * (len(self.shape) - np.ndim(self.which)))
        out = parts[0].dequantize(dtype, xp)
        for i, part in enumerate(parts[1:], 1):
            out = xp.where(which == i, part.dequantize(dtype, xp), out)
        return out
