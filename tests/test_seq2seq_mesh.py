"""Encoder-decoders on the (data, model) mesh of 8 virtual CPU devices (a subprocess): tiny random
mT5 and M2M100 folders (8 heads) give the 1-device log-probs and greedy continuations on every
mesh shape, their self- and cross-attention and MLP weights split along `model` by the same rule
table as the decoders' (read from the arrays' shards)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tiny_models import build_seq2seq

pytestmark = pytest.mark.full
MESHES = ("1x1", "8x1", "4x2", "2x4", "1x8")
FAMILIES = ("mt5", "m2m_100")
SCRIPT = """
import json
import jax
from babeleval.engine.seq2seq_generate import Seq2SeqGenerator
from babeleval.engine.seq2seq_scoring import Seq2SeqScorer
from babeleval.loading import load_model
from babeleval.requests import Generate, Loglikelihood

words = lambda *ids: " ".join(f"w{{i}}" for i in ids)
requests = [Loglikelihood(words(*range(5 + q, 12 + 2 * q)), " " + words(20 + q + o, 30 + o)) for q in range(6) for o in range(3)]
prompts = [Generate(words(*range(3 + p, 9 + 2 * p)), max_new_tokens=6) for p in range(5)]
out = {{}}
for family, folder in {folders!r}.items():
    model = load_model(folder)
    for spec in {meshes!r}:
        mesh = tuple(int(x) for x in spec.split("x"))
        scorer = Seq2SeqScorer(model, mesh=mesh)
        scanned = next(k for k in scorer.params if k.startswith("decoder_scan_"))  # mT5's layer 0 apart
        cross = scorer.params[scanned]["layer_0"]["cross_attn"]["q"]["kernel"]  # [layers, in, out]
        scored = scorer.loglikelihood(requests)
        out[family + ":" + spec] = {{"logprobs": [r.logprob for r in scored], "greedy": [r.is_greedy for r in scored],
                                    "generated": Seq2SeqGenerator(model, mesh=mesh, conventions=False).generate(prompts),
                                    "cross_q_shard": list(cross.addressable_shards[0].data.shape),
                                    "split": scorer.placement.split_tensors}}
        del scorer
        jax.clear_caches()
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def meshes(tmp_path_factory):
    folders = {}
    for family in FAMILIES:
        folder = tmp_path_factory.mktemp(family)
        heads = dict(num_heads=8, d_kv=8) if family == "mt5" else dict(encoder_attention_heads=8, decoder_attention_heads=8)
        build_seq2seq(family, folder, **heads)
        folders[family] = str(folder)
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8")
    done = subprocess.run([sys.executable, "-c", SCRIPT.format(folders=folders, meshes=MESHES)], env=env,
                          capture_output=True, text=True, timeout=900, cwd=Path(__file__).parent)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("mesh", MESHES[1:])
def test_every_mesh_gives_the_one_device_results(meshes, family, mesh):
    want, got = meshes[f"{family}:1x1"], meshes[f"{family}:{mesh}"]
    np.testing.assert_allclose(got["logprobs"], want["logprobs"], atol=1e-4, rtol=2e-5)
    assert got["greedy"] == want["greedy"] and got["generated"] == want["generated"]
    assert any(want["generated"]) and len(set(want["logprobs"])) > 10


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("mesh", MESHES)
def test_cross_attention_split_along_model(meshes, family, mesh):
    model = int(mesh.split("x")[1])
    entry = meshes[f"{family}:{mesh}"]
    layers, *shard = entry["cross_q_shard"]
    assert layers > 1 and shard == [64, 64 // model]  # every scanned layer, whole heads of 8 dims per device
    assert (entry["split"] > 0) == (model > 1)
