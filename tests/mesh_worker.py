"""Run real tasks on several (data, model) meshes of this process's devices (1x1 first: the
1-device reference) and write per mesh what tests/test_mesh.py compares: per-option
log-probs and chosen options (XCOPA-sw, 5-shot SIB-200 in MILU's prompt), greedy XQuAD-hi
continuations, this process's share of the scored rows and prompts, sentence embeddings
(all-MiniLM-L6-v2, L2-normed), where the weights went
(from the arrays' own shards), the KV caches generation built (their shards' shapes) and the
process's peak RSS.

  python mesh_worker.py OUT DATA MODEL MESHES [PARTS [PROCESS PROCESSES PORT]]
  MESHES: 1x1,4x2,... (data x model; 8x1:xcopa-sw+embed runs only those parts on that mesh);
  PARTS: any of xcopa-sw, sib200-milu, generate (XQuAD-hi, shared prompt prefixes prefilled
  once), generate-plain (the same without shared prefixes: the 1-device reference shows
  sharing changes no output), embed,
  tiny (a random byte-level decoder with 4 KV heads generating: split over model=2 and 4, whole
  over 8)"""
import contextlib
import dataclasses
import json
import resource
import sys
from pathlib import Path


SCORING = (("xcopa-sw", "sw", 8), ("sib200-milu", "swh_Latn", 3))  # (task, subset, questions)


def _unit(name: str, subset: str, data: Path, limit: int):
    from babeleval.evaluate import prepare_task
    from babeleval.tasks.files import find_task

    return next(u for u in prepare_task(find_task(name), data, limit=limit) if u.variant.key == subset)


def _placement(engine) -> dict:
    import jax

    from babeleval.placement.sharding import bytes_per_device

    leaves = jax.tree.leaves(engine.params)
    return {**engine.placement.as_dict(), "per_device": sorted(bytes_per_device(engine.params).values()),
            "replicated_bytes": sum(x.nbytes for x in leaves if x.sharding.is_fully_replicated),
            "total_bytes": sum(x.nbytes for x in leaves)}


def _shards(cache) -> dict:
    """A per-layer KV cache's global shapes and the shapes of the shards of all its k, v arrays."""
    import jax

    leaves = jax.tree.leaves(cache)
    return {"shapes": sorted({tuple(x.shape) for x in leaves}), "devices": sorted({len(x.addressable_shards) for x in leaves}),
            "shards": sorted({tuple(s.data.shape) for x in leaves for s in x.addressable_shards})}


@contextlib.contextmanager
def kv_caches():
    """Records the KV caches the Generator builds: every decode cache (join_batches' or
    take_group's output, what the decode loop runs on) and every shared-prefix table
    (prefix_table's, placed by place_kv)."""
    from babeleval.engine import generate

    seen = {"decode": [], "prefix": []}
    join, take, table = generate.join_batches, generate.take_group, generate.prefix_table

    def decoded(made):
        def record(*args, **kwargs):
            first, cache = made(*args, **kwargs)
            seen["decode"].append(_shards(cache))
            return first, cache
        return record

    def tabled(*args, **kwargs):
        out = table(*args, **kwargs)
        seen["prefix"].append(_shards(out))
        return out

    generate.join_batches, generate.take_group, generate.prefix_table = decoded(join), decoded(take), tabled
    try:
        yield seen
    finally:
        generate.join_batches, generate.take_group, generate.prefix_table = join, take, table


def tiny_decoder():
    """A random byte-level decoder whose 4 KV heads (8 query heads) divide model=2 and 4, not 8."""
    import jax
    import jax.numpy as jnp

    from babeleval.loading import LoadedModel
    from babeleval.loading.tokenizer import ByteTokenizer
    from babeleval.models import init_params
    from babeleval.models.bytelm import bytelm_config

    config = dataclasses.replace(bytelm_config(layers=2, hidden=64, heads=8, context=256), num_kv_heads=4)
    return LoadedModel(config, init_params(config, jax.random.PRNGKey(0)), ByteTokenizer(), jnp.float32, "tiny-kv4")


TINY_PREFIX = ("A paragraph that several questions share, long enough to be cached once: its three questions "
               "save twice its length, past the 256 tokens that make a prefix worth its own programs: ")  # 179 bytes
TINY_PROMPTS = [TINY_PREFIX + q for q in ("who?", "where was it?", "when did it happen?")] + ["on its own"]


def main(out: str, data: str, model_name: str, meshes: str, parts: str = "xcopa-sw,sib200-milu,generate,embed") -> None:
    import jax

    if len(sys.argv) > 6:  # process id, processes, port: one of several jax.distributed processes
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        jax.distributed.initialize(f"127.0.0.1:{sys.argv[8]}", num_processes=int(sys.argv[7]),
                                   process_id=int(sys.argv[6]))
    from babeleval.engine.embed import Embedder
    from babeleval.engine.generate import Generator
    from babeleval.engine.scoring import Scorer
    from babeleval.loading import load_model
    from babeleval.requests import Embed, Generate

    data, parts = Path(data), parts.split(",")
    model = load_model(model_name)
    scoring = {name: _unit(name, subset, data, limit) for name, subset, limit in SCORING if name in parts}
    xquad = _unit("xquad-hi", "hi", data, 2)
    prompts = [dataclasses.replace(r, max_new_tokens=6) for r in xquad.kind.requests(xquad.items)]
    texts = [q.context for q in _unit("xcopa-sw", "sw", data, 8).items]
    encoder = load_model("all-minilm-l6-v2") if "embed" in parts else None
    tiny = tiny_decoder() if "tiny" in parts else None
    results = {}
    for spec in meshes.split(","):
        spec, _, only = spec.partition(":")
        mesh, wanted = tuple(int(x) for x in spec.split("x")), only.split("+") if only else parts
        scorer = Scorer(model, mesh=mesh)
        entry = {"placement": _placement(scorer)}
        for name, unit in ((n, u) for n, u in scoring.items() if n in wanted):
            entry[name] = [r.logprob for r in scorer.loglikelihood(unit.kind.requests(unit.items))]
        entry["questions"] = scorer.stats.questions  # this process's share of the rows scored
        with kv_caches() as kv:
            if "generate" in wanted:
                generator = Generator(model, mesh=mesh)
                entry["xquad-hi"] = generator.generate(prompts)
                entry["prompt_tokens"] = generator.stats.prompt_tokens  # this process's share of the prompts
            if "generate-plain" in wanted:
                entry["xquad-hi-plain"] = Generator(model, mesh=mesh, share_prefixes=False).generate(prompts)
        entry["kv"] = {"xquad-hi": kv}
        if "tiny" in wanted:
            with kv_caches() as kv:
                done = Generator(tiny, mesh=mesh).generate_results([Generate(p, max_new_tokens=12) for p in TINY_PROMPTS])
            entry["tiny"] = [[r.text, r.stop_reason, r.new_tokens] for r in done]
            entry["kv"]["tiny"] = kv
        if "embed" in wanted:
            entry["embed"] = Embedder(encoder, mesh=mesh).embed([Embed(t) for t in texts]).tolist()
        entry["peak_rss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # this process's, so far
        results[spec] = entry
        del scorer  # 8 devices x 0.5 GB of replicated weights: one mesh's copy at a time
        jax.clear_caches()  # and its compiled programs (no other mesh runs them)
    Path(out).write_text(json.dumps({"options": {name: [len(q.choices) for q in u.items] for name, u in scoring.items()},
                                     "processes": jax.process_count(), "meshes": results}))


if __name__ == "__main__":
    main(*sys.argv[1:6])
