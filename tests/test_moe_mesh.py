"""A mixture of experts on the (data, model) mesh of 8 virtual CPU devices (a subprocess): a tiny
random Qwen3-MoE folder (8 experts, top-2, built by transformers) gives the 1-device log-probs
and greedy continuations on every mesh shape, its experts split whole along `model` (each
device holds 8/model experts of every MoE layer, read from the arrays' shards)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tiny_models import build

pytestmark = pytest.mark.full
MESHES = ("1x1", "8x1", "4x2", "2x4", "1x8")
SCRIPT = """
import json, sys
import jax
from babeleval.engine.generate import Generator
from babeleval.engine.scoring import Scorer
from babeleval.loading import load_model
from babeleval.requests import Generate, Loglikelihood

model = load_model({folder!r})
words = lambda *ids: " ".join(f"w{{i}}" for i in ids)
requests = [Loglikelihood(words(*range(5 + q, 12 + q)), " " + words(20 + q + o, 30 + o)) for q in range(6) for o in range(3)]
prompts = [Generate(words(*range(3 + p, 9 + 2 * p)), max_new_tokens=6) for p in range(5)]
out = {{}}
for spec in {meshes!r}:
    mesh = tuple(int(x) for x in spec.split("x"))
    scorer = Scorer(model, mesh=mesh)
    experts = [x for path, x in jax.tree_util.tree_flatten_with_path(scorer.params)[0] if "experts_" in jax.tree_util.keystr(path)]
    scored = scorer.loglikelihood(requests)
    out[spec] = {{"logprobs": [r.logprob for r in scored], "greedy": [r.is_greedy for r in scored],
                  "generated": Generator(model, mesh=mesh).generate(prompts),
                  "expert_shards": sorted({{tuple(s.data.shape) for x in experts for s in x.addressable_shards}}),
                  "expert_shapes": sorted({{tuple(x.shape) for x in experts}})}}
    del scorer
    jax.clear_caches()
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def meshes(tmp_path_factory):
    folder = tmp_path_factory.mktemp("moe")
    build("qwen3_moe", folder)
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8")
    code = SCRIPT.format(folder=str(folder), meshes=MESHES)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=900,
                          cwd=Path(__file__).parent)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.parametrize("mesh", MESHES[1:])
def test_every_mesh_gives_the_one_device_results(meshes, mesh):
    want, got = meshes["1x1"], meshes[mesh]
    np.testing.assert_allclose(got["logprobs"], want["logprobs"], atol=1e-4, rtol=2e-5)
    assert got["greedy"] == want["greedy"] and got["generated"] == want["generated"]
    assert any(want["generated"]) and len(set(want["logprobs"])) > 10


@pytest.mark.parametrize("mesh", MESHES)
def test_experts_split_whole_along_model(meshes, mesh):
    model = int(mesh.split("x")[1])
    entry = meshes[mesh]
    # [layers, experts, in, out] (down, gate/up) of the scanned layers
    assert entry["expert_shapes"] == [[3, 8, 32, 64], [3, 8, 64, 32]]
    assert entry["expert_shards"] == sorted([[3, 8 // model, 32, 64], [3, 8 // model, 64, 32]])
