"""The two grouped matmuls of models/moe.py (blocks on CPU, lax.ragged_dot elsewhere) equal a
plain numpy product of each row with its own expert's weights, an expert without rows and one
with more rows than a block included."""
import numpy as np

from babeleval.models.moe import BLOCK, grouped_matmul, ragged_matmul


def test_grouped_matmuls_equal_numpy():
    rng = np.random.default_rng(0)
    sizes = np.asarray([3, 0, BLOCK + 5, 1, 17], np.int32)
    rows = rng.standard_normal((int(sizes.sum()), 24)).astype(np.float32)
    weights = rng.standard_normal((len(sizes), 24, 40)).astype(np.float32)
    expert = np.repeat(np.arange(len(sizes)), sizes)
    want = np.einsum("rk,rkf->rf", rows, weights[expert])
    for matmul in (grouped_matmul, ragged_matmul):
        np.testing.assert_allclose(np.asarray(matmul(rows, weights, sizes)), want, atol=1e-4, rtol=1e-5)
