"""The (data, model) mesh on 8 virtual CPU devices (tests/mesh_worker.py in a subprocess):
meshes 8x1, 2x4 and 1x8 give the 1-device results on real XCOPA-sw and 5-shot SIB-200
(MILU prompt), greedy XQuAD-hi and embeddings (4x2: a random decoder's greedy generation);
weights split by the rule table, with the tensors whose heads do not divide the model axis
held whole, counted; bytes per device read from the arrays' shards; generation's KV caches
(decode caches, prefix tables) split by KV heads along model where they divide it (a random
decoder's 4 KV heads over 2 and 4, whole over 8; SmolLM2's 3: never), from their shards too,
and a prefix table holds its prefixes only (never a padded row per data shard). A run on a
(2, 2) mesh from the CLI, killed and resumed, equals an uninterrupted 1-device run; two
jax.distributed processes x 2 devices with data=2,model=2 split the scored rows and the prompts
between them and equal one process.

The decoders are random, shaped as SmolLM2-135M (9 query heads, 3 KV heads, its tokenizer) and
Gemma 3 270M (4 query heads, 1 KV head) with 3 layers (tiny_models.SHAPED): placement and
sharding depend on those shapes, not on the weights, and 30 real layers compiled once per mesh
cost CI minutes. Real weights on every shape: tests/test_parity_real.py, tests/test_golden.py."""
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from test_kill_resume import WORKER as KILL_WORKER, complete_records, task_results

pytestmark = pytest.mark.full
WORKER = Path(__file__).parent / "mesh_worker.py"
MESHES = ("8x1", "4x2", "2x4", "1x8")
PARTS = "xcopa-sw,sib200-milu,generate,embed,tiny"
# Rounds of worker processes, the processes of a round at once (a worker compiles on one core most of
# the time; two keep both busy). 4x2 runs the random 4-KV-head decoder only (its KV heads split in two
# there, in four on 2x4): the SmolLM2-shaped parts on a mixed mesh are checked on 2x4 and on two
# processes of 2x2.
ROUNDS = (("1x1:" + PARTS.replace(",", "+") + "+generate-plain", "1x8", "4x2:tiny"), ("8x1", "2x4"))
TINY_ONLY = ("4x2",)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(out: Path, data: Path, model: str, meshes, parts=None, devices=8, process=None):
    env = dict(os.environ, XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}")
    args = [sys.executable, str(WORKER), str(out), str(data), model, ",".join(meshes)]
    args += [parts or PARTS] + [str(x) for x in process or ()]
    return subprocess.Popen(args, env=env)


def _run(tmp: Path, data: Path, model: str, rounds, parts=None) -> dict:
    """rounds: tuples of worker processes run at once, each process a comma-separated list of
    meshes it runs in turn."""
    merged = None
    for processes in rounds:
        outs = [tmp / f"{p.split(',')[0].partition(':')[0]}.json" for p in processes]
        workers = [_worker(out, data, model, p.split(","), parts) for out, p in zip(outs, processes)]
        assert [w.wait(timeout=1200) for w in workers] == [0] * len(workers)
        for out in outs:
            one = json.loads(out.read_text())
            merged = one if merged is None else {**merged, "meshes": {**merged["meshes"], **one["meshes"]}}
    return merged


LAYERS = 3  # of the SmolLM2- and Gemma-3-shaped decoders


@pytest.fixture(scope="module")
def smollm2(shared_data, tmp_path_factory, tiny_smollm2):
    return _run(tmp_path_factory.mktemp("mesh"), shared_data, str(tiny_smollm2), ROUNDS)


@pytest.fixture(scope="module")
def gemma3(shared_data, tmp_path_factory):
    from tiny_models import build_shaped

    folder = tmp_path_factory.mktemp("tiny-gemma3")
    build_shaped("gemma3", folder, LAYERS)
    return _run(tmp_path_factory.mktemp("mesh"), shared_data, str(folder), (("1x1,4x2,1x8",),), "xcopa-sw")


def assert_same_scores(result: dict, reference: dict, options: dict) -> None:
    """Per-option log-probs within max(1e-4, 2e-5 |logp|), the same chosen option per question."""
    for task, counts in options.items():
        got, want = np.asarray(result[task]), np.asarray(reference[task])
        np.testing.assert_array_less(np.abs(got - want), np.maximum(1e-4, 2e-5 * np.abs(want)))
        bounds = np.cumsum([0] + counts)
        chosen = lambda lp: [int(np.argmax(lp[a:b])) for a, b in zip(bounds[:-1], bounds[1:])]  # noqa: E731
        assert chosen(got) == chosen(want), task


@pytest.mark.parametrize("mesh", [m for m in MESHES if m not in TINY_ONLY])
def test_every_mesh_gives_the_one_device_results(smollm2, mesh):
    reference, result = smollm2["meshes"]["1x1"], smollm2["meshes"][mesh]
    assert sum(smollm2["options"]["sib200-milu"]) == 21 and len(smollm2["options"]["xcopa-sw"]) == 8
    assert_same_scores(result, reference, smollm2["options"])
    assert reference["xquad-hi-plain"] == reference["xquad-hi"] and any(reference["xquad-hi"])  # sharing changes nothing
    assert result["xquad-hi"] == reference["xquad-hi"]
    np.testing.assert_allclose(result["embed"], reference["embed"], atol=1e-5, rtol=0)


@pytest.mark.parametrize("mesh", MESHES)
def test_a_decode_cache_split_by_kv_heads_decodes_as_one_whole(smollm2, mesh):
    assert smollm2["meshes"][mesh]["tiny"] == smollm2["meshes"]["1x1"]["tiny"]  # split on 4x2 and 2x4


def test_prefix_tables_hold_their_prefixes_only(smollm2):
    """A shared prefix's table has one row per prefix on every mesh (XQuAD-hi's two prompts share
    one paragraph, the random decoder's three prompts one header), placed whole on each device:
    once it was padded to a row per data shard, 8 rows of 1,536 slots on each of 8x1's devices
    (4.5 of SmolLM2's 11.7 GB there)."""
    for mesh, entry in smollm2["meshes"].items():
        for name in ("xquad-hi", "tiny"):
            tables = entry["kv"].get(name, {}).get("prefix", [])
            assert name not in entry or tables, (mesh, name)
            for table in tables:  # k, v [rows, layers of a group, heads, slots, D]
                assert {shape[0] for shape in table["shapes"]} == {1}, (mesh, name, table)


def _kv_split(kv: dict, mesh: str, heads: int) -> bool:
    """Every KV cache generation built on this mesh (decode caches: rows along data; prefix tables:
    all rows on every data shard) holds heads/model KV heads per device where model divides heads,
    all of them where it does not (returns False there: a fallback). From addressable_shards."""
    data, model = (int(x) for x in mesh.split("x"))
    per = heads // model if heads % model == 0 else heads
    assert kv["decode"]
    for kind, caches in kv.items():
        for cache in caches:  # per layer group k, v [rows, layers, heads, slots, D]: rows and heads split
            shapes = cache["shapes"]
            assert {shape[2] for shape in shapes} == {heads} and cache["devices"] == [data * model]
            rows = shapes[0][0] // data if kind == "decode" else shapes[0][0]
            assert cache["shards"] == sorted([rows, s[1], per, *s[3:]] for s in shapes), (mesh, kind)
    return per < heads


def test_generation_kv_cache_split_by_kv_heads_where_they_divide_the_model_axis(smollm2):
    split, fallback = {"tiny": [], "xquad-hi": []}, {"tiny": [], "xquad-hi": []}
    for mesh, entry in smollm2["meshes"].items():
        for name, heads in (("tiny", 4), ("xquad-hi", 3)):  # a random decoder's 4 KV heads; SmolLM2's 3
            if name not in entry:  # the mesh did not run it (TINY_ONLY)
                continue
            if _kv_split(entry["kv"][name], mesh, heads):
                split[name].append(mesh)
            elif not mesh.endswith("x1"):
                fallback[name].append(mesh)
        assert entry["kv"]["tiny"]["prefix"]  # its shared prefix's table too
    assert {k: sorted(v) for k, v in split.items()} == {"tiny": ["2x4", "4x2"], "xquad-hi": []}
    assert {k: sorted(v) for k, v in fallback.items()} == {"tiny": ["1x8"], "xquad-hi": ["1x8", "2x4"]}  # counted


def _assert_split_as_ruled(placement: dict, model: int, fallbacks: int) -> None:
    """Every device holds the replicated tensors whole and 1/model of the rest (from addressable_shards)."""
    assert placement["mesh"]["model"] == model and placement["fallback_tensors"] == fallbacks
    total, whole = placement["total_bytes"], placement["replicated_bytes"]
    assert placement["per_device"] == [(total - whole) // model + whole] * len(placement["per_device"])
    assert placement["weight_bytes_per_device"] == (total - whole) // model + whole
    if model > 1:
        assert whole < total and placement["split_tensors"] > 0


def test_smollm2_weights_split_by_rule_with_its_attention_held_whole(smollm2):
    layers = LAYERS  # 9 query heads, 3 KV heads: q, k, v, o of every layer cannot split over 2, 4 or 8
    for mesh, entry in smollm2["meshes"].items():
        model = int(mesh.split("x")[1])
        _assert_split_as_ruled(entry["placement"], model, 4 * layers if model > 1 else 0)
    assert smollm2["meshes"]["1x8"]["placement"]["weight_bytes_per_device"] < 0.35 * smollm2["meshes"]["1x1"]["placement"]["total_bytes"]


def test_gemma3_splits_query_heads_until_they_run_out(gemma3):
    layers = LAYERS  # 4 query heads, 1 KV head: k, v whole over 2 and 4 devices; q, o too over 8
    meshes = gemma3["meshes"]
    _assert_split_as_ruled(meshes["4x2"]["placement"], 2, 2 * layers)
    _assert_split_as_ruled(meshes["1x8"]["placement"], 8, 4 * layers)
    for mesh in ("4x2", "1x8"):
        assert_same_scores(meshes[mesh], meshes["1x1"], gemma3["options"])


def test_two_processes_with_data_2_model_2_equal_one_process(smollm2, shared_data, tmp_path, tiny_smollm2):
    port = _free_port()
    procs = [_worker(tmp_path / f"p{i}.json", shared_data, str(tiny_smollm2), ("2x2",), "xcopa-sw,sib200-milu,generate",
                     devices=2, process=(i, 2, port)) for i in range(2)]
    assert all(p.wait(timeout=900) == 0 for p in procs)
    reference = smollm2["meshes"]["1x1"]
    entries = []
    for i in range(2):
        out = json.loads((tmp_path / f"p{i}.json").read_text())
        entry = out["meshes"]["2x2"]
        assert out["processes"] == 2 and entry["placement"]["mesh"] == {"data": 2, "model": 2}
        assert_same_scores(entry, reference, smollm2["options"])
        assert entry["xquad-hi"] == reference["xquad-hi"]  # each generated its share, all got all
        entries.append(entry)
    for work in ("questions", "prompt_tokens"):  # the work was split, not done twice
        shares = [entry[work] for entry in entries]
        assert sum(shares) == reference[work] and min(shares) > 0, (work, shares)


def _babeleval(point: str, out: Path, cache: Path, devices: int, model: Path, *mesh: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    env.update(BABELEVAL_CACHE=str(cache), BABELEVAL_CPU_DEVICES=str(devices))
    return subprocess.run([sys.executable, str(KILL_WORKER), point, "run", "--quiet", "--task", "cldr-weekdays:fr,am",
                           "--model", str(model), "--output", str(out), *mesh],
                          env=env, capture_output=True, text=True, timeout=900)


def test_cli_run_on_a_2x2_mesh_killed_and_resumed_equals_one_device(tmp_path, tiny_smollm2):
    reference = _babeleval("none", tmp_path / "one", tmp_path / "cache", 1, tiny_smollm2)
    assert reference.returncode == 0, reference.stderr
    out = tmp_path / "mesh"
    killed = _babeleval("mid-line", out, tmp_path / "cache", 4, tiny_smollm2, "--mesh", "data=2,model=2")
    assert killed.returncode == -9, killed.stderr
    assert len(complete_records(out)) == 6
    again = _babeleval("none", out, tmp_path / "cache", 4, tiny_smollm2, "--mesh", "data=2,model=2")
    assert again.returncode == 0, again.stderr
    assert task_results(out) == task_results(tmp_path / "one")
    one = {(r["key"], r["id"]): r for r in complete_records(tmp_path / "one")}
    mesh = {(r["key"], r["id"]): r for r in complete_records(out)}
    assert one.keys() == mesh.keys()
    for key, record in one.items():
        assert mesh[key]["chosen"] == record["chosen"]
        assert mesh[key]["loglikelihoods"] == pytest.approx(record["loglikelihoods"], abs=1e-4)
    devices = json.loads((out / "results.json").read_text())["devices"]
    assert devices["mesh"] == {"data": 2, "model": 2} and devices["local_devices"] == 4
    assert devices["fallback_tensors"] == 4 * LAYERS and devices["dtype"] == "float32"
    assert devices["weight_bytes_per_device"] < devices["weight_bytes"]
