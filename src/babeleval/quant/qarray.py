"""A quantized weight as data in the model: its fields (code planes as stored, block scales, a
per-block minimum where the layout has one; layouts.py) and the dense array it stands for.

Fields are [*lead, rows, blocks, ...]: rows the stored rows (a torch Linear's outputs, an
embedding's vocabulary), blocks running along the stored row (the inputs), lead the experts of a
stacked mixture. `shape` is the dense parameter's (a flax kernel [in, out]: `transposed`, the
stored [out, in] swapped). A JAX pytree: placed, sharded and passed to jit as its fields; the
model dequantizes it inside the jitted forward just before its matmul (models/weights.py).

A GPTQ act-order weight's inputs are held sorted by their group, so that each group is one run of
a row, and its ORDER field ([*lead, inputs] int32) puts the dequantized inputs back in place."""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from .blocks import dequantize_blocks

ORDER = "order"  # the field that puts a dequantized row's inputs back in the order the weight uses


def _lead_key(keys) -> str:
    """The field whose leading axes are the weight's (every field but ORDER has the core axes)."""
    return min(k for k in keys if k != ORDER)


@jax.tree_util.register_pytree_node_class
class QArray:
    def __init__(self, fields: dict, layout: str, shape: tuple, transposed: bool = False, core: int | None = None,
                 raw=None):
        self.fields, self.layout, self.shape, self.transposed = fields, layout, tuple(shape), transposed
        # the stored row bytes the fields were split from ([*lead, rows, row bytes], the file's
        # pages: no copy), host-side only (not a pytree child): what a QStack holds of the layer
        self.raw = raw
        first = fields[_lead_key(fields)] if fields else None
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
        now = getattr(children[keys.index(_lead_key(keys))], "shape", None) if children else None
        if core is not None and isinstance(now, tuple):
            shape = tuple(now[:len(now) - core]) + shape[-2:]
        return cls(dict(zip(keys, children)), layout, shape, transposed, core)

    def __repr__(self):
        return f"QArray({self.layout}, shape={self.shape}{', transposed' if self.transposed else ''})"

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def blocks(self) -> int:
        """Blocks per stored row (a field's axis after the rows; ORDER has none)."""
        return self.fields[_lead_key(self.fields)].shape[self.ndim - 1]

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
        return QArray(self.fields, self.layout, self.shape[:-2] + self.shape[:-3:-1], not self.transposed,
                      raw=self.raw)

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
        fields = {k: v if k == ORDER else np.asarray(v)[(slice(None),) * axis + (index,)]
                  for k, v in self.fields.items()}
        stored = self.stored_shape
        stored = stored[:axis] + (fields[_lead_key(fields)].shape[axis],) + stored[axis + 1:]
        raw = None if self.raw is None else Rows(self.raw, axis, index)
        out = QArray(fields, self.layout, stored, raw=raw)
        return out.swap() if self.transposed else out

    def dequantize(self, dtype=jnp.float32, xp=jnp):
        """The dense array (inside jit: a fused computation before its matmul)."""
        stored = dequantize_blocks(self.layout, self.fields, xp)
        stored = stored.reshape(self.stored_shape)
        if ORDER in self.fields:  # act-order: input i is held at position order[i]
            order = self.fields[ORDER][..., None, :]
            stored = xp.take_along_axis(stored, xp.broadcast_to(order, stored.shape), axis=-1)
        return (stored.swapaxes(-1, -2) if self.transposed else stored).astype(dtype)

    def take(self, ids, dtype=jnp.float32):
        """Rows `ids` of an embedding table (not transposed), dequantized: [*ids.shape, dim]."""
        fields = {k: jnp.take(v, ids, axis=0) for k, v in self.fields.items()}
        return dequantize_blocks(self.layout, fields).astype(dtype)


class Rows:
    """Rows `index` (along `axis`) of stored bytes `base` (the file's pages), read only when asked
    for (np.asarray: a QStack of layers in several layouts), so a QArray's rows copy no bytes."""

    def __init__(self, base, axis: int, index):
        self.base, self.axis, self.index = base, axis, index
        shape = tuple(base.shape)
        self.shape = shape[:axis] + np.arange(shape[axis])[index].shape + shape[axis + 1:]

    def __array__(self, dtype=None, copy=None):
        out = np.asarray(self.base)[(slice(None),) * self.axis + (self.index,)]
        return out if dtype is None else out.astype(dtype)


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

    return QArray(split_blocks(layout, raw), layout, shape, raw=raw)


@jax.tree_util.register_pytree_node_class
class QStack:
    """A stacked weight ([layers, ...]) whose layers are held in different layouts (a Q4_K_M GGUF
    stores attn_v and ffn_down as Q6_K in about half the layers, Q4_K in the rest): each layer
    once, as stored. `raw` [layers, *lead, rows, width] uint8: each layer's stored row bytes as in
    the file, width the widest layout's row bytes (a narrower layout's rows zero-padded at the
    end); `which` [layers] the index of each layer's layout in `layouts`. Inside a scan (one
    layer: `which` a scalar) dequantizing switches to that layout's branch, which reads its row
    bytes, splits them into the layout's fields (layouts.split_blocks) and dequantizes them."""

    def __init__(self, raw, which, layouts: tuple, shape: tuple, transposed: bool = False):
        self.raw, self.which, self.layouts = raw, which, tuple(layouts)
        self.shape, self.transposed = tuple(shape), transposed

    def tree_flatten(self):
        return (self.raw, self.which), (self.layouts, self.shape, self.transposed)

    @classmethod
    def tree_unflatten(cls, aux, children):
        """The leading axes follow raw's (a scan's slice: one layer)."""
        layouts, shape, transposed = aux
        now = getattr(children[0], "shape", None)
        if isinstance(now, tuple):
            shape = tuple(now[:-2]) + shape[-2:]
        return cls(children[0], children[1], layouts, shape, transposed)

    def __repr__(self):
        return f"QStack({self.layout}, shape={self.shape}{', transposed' if self.transposed else ''})"

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: math.prod(self.shape))
    layout = property(lambda self: "+".join(sorted(self.layouts)))

    @property
    def stored_shape(self) -> tuple:
        return self.shape[:-2] + self.shape[:-3:-1] if self.transposed else self.shape

    @property
    def widths(self) -> tuple:
        """Each layout's row bytes (the stored row's elements in its blocks)."""
        from .layouts import row_bytes

        return tuple(row_bytes(name, self.stored_shape[-1]) for name in self.layouts)

    @property
    def block_size(self) -> int:
        from .layouts import LAYOUTS

        return max(LAYOUTS[name].block for name in self.layouts)

    @property
    def fields(self) -> dict:
        """What is held: the row bytes and `which`."""
        return {"raw": self.raw, "which": self.which}

    @property
    def nbytes(self) -> int:
        return sum(int(np.prod(f.shape)) * np.dtype(f.dtype).itemsize for f in self.fields.values())

    @property
    def bits(self) -> float:
        return 8 * self.nbytes / self.size

    def _dense(self, k: int, raw, dtype, xp):
        """raw's rows read as layout k: the dense array (raw's leading axes kept)."""
        from .layouts import split_blocks

        name, width = self.layouts[k], self.widths[k]
        stored = dequantize_blocks(name, split_blocks(name, raw[..., :width], xp), xp)
        stored = stored.reshape(tuple(raw.shape[:-1]) + (self.stored_shape[-1],))
        return (stored.swapaxes(-1, -2) if self.transposed else stored).astype(dtype)

    def dequantize(self, dtype=jnp.float32, xp=jnp):
        if xp is jnp and jnp.ndim(self.which) == 0:  # one layer, inside the scan
            raw = self.raw
            return jax.lax.switch(self.which, [lambda k=k: self._dense(k, raw, dtype, jnp)
                                               for k in range(len(self.layouts))])
        if xp is np:  # the whole stack on the host (a dense fallback): each layer by its layout
            raw, which = np.asarray(self.raw), np.asarray(self.which)
            out = np.zeros(self.shape, dtype)
            for k in range(len(self.layouts)):
                if (which == k).any():
                    out[which == k] = self._dense(k, raw[which == k], dtype, np)
            return out
        which = self.which.reshape(self.which.shape + (1,) * (len(self.shape) - self.which.ndim))
        out = self._dense(0, self.raw, dtype, xp)
        for k in range(1, len(self.layouts)):
            out = xp.where(which == k, self._dense(k, self.raw, dtype, xp), out)
        return out
