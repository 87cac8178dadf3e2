"""`babeleval bench --model M --task T [--limit N]`: how fast a full run will be, measured
on the task's own requests before it is started.

The requests are answered twice by fresh engines: the first call includes compiling (or
loading compiled programs from the cache), the second is the steady state. Reported: requests
per second (steady), compile seconds (first minus second), the tokens the model computed
against those a no-sharing engine computes (lm-eval's HF backend runs every request's context
+ continuation on its own; babeleval shares each question's context across its options,
computes a prefix many contexts share once and scores identical requests once), padding, and MFU = 2 x parameters x tokens computed /
seconds / peak, the peak being one jitted 2048^3 matmul per local device at once, in the
model's dtype, measured here (the best of 5, after one warm-up)."""
from __future__ import annotations

import time
from pathlib import Path

from .errors import BabelevalError
from .engines import Engines, scorer_for
from .quant.summary import recorded
from .requests import Generate, Loglikelihood


def matmul_peak(dtype, n: int = 2048, repeats: int = 5) -> float:
    """FLOP/s of all local devices together: one n x n x n jitted matmul per device at once
    (a batch sharded over the devices), best of `repeats` after a warm-up."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec

    from .placement.devices import mesh, num_devices

    devices = num_devices()
    a = jax.device_put(jnp.ones((devices, n, n), dtype), NamedSharding(mesh(), PartitionSpec("data")))
    f = jax.jit(lambda x: jnp.einsum("bij,bjk->bik", x, x))
    f(a).block_until_ready()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        f(a).block_until_ready()
        best = min(best, time.perf_counter() - start)
    return 2 * devices * n ** 3 / best


def _timed(make_engine, call):
    engine = make_engine()
    start = time.perf_counter()
    call(engine)
    return engine, time.perf_counter() - start


def bench(model, tasks: list[str], data: Path | None = None, limit: int | None = 20, batch_size: int | None = None,
          mesh=None) -> dict:
    """model: a LoadedModel; mesh: 'auto', 'data=D,model=M' or (D, M). Returns the measurements
    (see the module docstring); devices records the mesh and the weights per device, quantization
    how the weights are held (as run's results.json)."""
    from .placement.devices import describe
    from .evaluate import find_tasks, prepare_task

    from .tasks.chat_prompts import resolve_chat

    units = [u for t in tasks for c in find_tasks(t) for u in prepare_task(resolve_chat(c, model), data, limit)]
    requests = [r for u in units for r in u.kind.requests(u.items)]
    if not requests:
        raise BabelevalError(f"{', '.join(tasks)}: no documents to measure")
    scoring = [r for r in requests if isinstance(r, Loglikelihood)]
    generating = [r for r in requests if isinstance(r, Generate)]
    if not scoring and not generating:
        raise BabelevalError(f"{', '.join(tasks)}: bench measures scoring and generation tasks (this one embeds)")
    from .placement.sharding import place_model

    peak = matmul_peak(model.dtype)
    placement = place_model(model, mesh)[2].as_dict()
    out = {"model": model.source, "params": model.num_params, "quantization": recorded(model.quantization),
           "devices": {**describe(), **placement}, "documents": sum(len(u.items) for u in units),
           "peak_flops": peak, "peak_measured_by": "a jitted 2048^3 matmul per device at once, model dtype, best of 5"}
    if scoring:
        make = lambda: scorer_for(model, batch_size=batch_size, mesh=mesh)  # noqa: E731
        _, cold = _timed(make, lambda e: e.loglikelihood(scoring))
        engine, warm = _timed(make, lambda e: e.loglikelihood(scoring))
        s = engine.stats
        out["scoring"] = {"requests": len(scoring), "seconds_first_call": round(cold, 2), "seconds": round(warm, 2),
                          "compile_seconds": round(max(cold - warm, 0.0), 2), "requests_per_second": len(scoring) / warm,
                          "tokens_computed": s.tokens_computed, "tokens_without_sharing": s.tokens_alone,
                          "sharing_saves": 1 - s.tokens_computed / s.tokens_alone, "tokens_shared_in_rows": s.tokens_shared,
                          "tokens_padded": s.tokens_padded,
                          "duplicates": s.duplicates, "prefixes": s.prefixes, "prefix_tokens": s.prefix_tokens,
                          "prefix_tokens_reused": s.prefix_tokens_reused, "tokens_per_second": s.tokens_computed / warm,
                          "mfu": 2 * model.num_params * s.tokens_computed / warm / peak}
    if generating:  # by the engines `run` uses: lm-eval tasks' requests by HFLM's rules (ExactGenerator)
        kinds = list(dict.fromkeys(type(r) for r in generating))
        answer = lambda engines: [engines.answer([r for r in generating if type(r) is k]) for k in kinds]  # noqa: E731
        make = lambda: Engines(model, batch_size=batch_size, mesh=mesh)  # noqa: E731
        _, cold = _timed(make, answer)
        engines, warm = _timed(make, answer)
        s = engines.stats()["generation"]
        tokens = s["prompt_tokens"] + s["new_tokens"]
        out["generation"] = {"requests": len(generating), "seconds_first_call": round(cold, 2), "seconds": round(warm, 2),
                             "compile_seconds": round(max(cold - warm, 0.0), 2),
                             "requests_per_second": len(generating) / warm,
                             "engines": [type(engines.built[k]).__name__ for k in kinds],
                             "new_tokens_per_second": s["new_tokens"] / warm,
                             **{k: s[k] for k in ("prompt_tokens", "new_tokens", "prefixes", "prefix_tokens",
                                                  "prefix_tokens_reused", "prefill_seconds", "decode_seconds",
                                                  "decode_row_steps")},
                             "mfu": 2 * model.num_params * tokens / warm / peak}
    return out


def _mesh_text(devices: dict) -> str:
    if "mesh" not in devices:
        return ""
    m = devices["mesh"]
    return (f", mesh data={m['data']},model={m['model']} ({devices['dtype']}, "
            f"{devices['weight_bytes_per_device'] / 2 ** 20:.0f} MiB of weights per device, "
            f"{devices['fallback_tensors']} tensors whole for want of a divisible split)")


def summary_lines(result: dict) -> list[str]:
    d, q = result["devices"], result["quantization"]
    held = f", {q['method']}: {q['bits_per_param']} bits per parameter" if q else ""
    lines = [f"{result['model']} ({result['params'] / 1e6:.1f}M parameters{held}) on {d['local_devices']} {d['platform']} "
             f"device(s){_mesh_text(d)}; {result['documents']} documents; peak {result['peak_flops'] / 1e9:.1f} GFLOP/s "
             f"({result['peak_measured_by']})"]
    if "scoring" in result:
        s = result["scoring"]
        lines.append(f"scoring: {s['requests']} requests, {s['requests_per_second']:.1f} req/s, "
                     f"{s['tokens_per_second']:.0f} tokens/s, compile {s['compile_seconds']:.1f} s, tokens computed "
                     f"{s['tokens_computed']} vs {s['tokens_without_sharing']} without sharing "
                     f"({100 * s['sharing_saves']:.0f}% saved; {s['prefixes']} shared prefixes reused for "
                     f"{s['prefix_tokens_reused']} tokens), {s['duplicates']} duplicates, MFU {100 * s['mfu']:.1f}%")
    if "generation" in result:
        g = result["generation"]
        lines.append(f"generation ({', '.join(g['engines'])}): {g['requests']} prompts, {g['requests_per_second']:.2f} prompts/s, "
                     f"{g['new_tokens_per_second']:.1f} new tokens/s, compile {g['compile_seconds']:.1f} s, "
                     f"{g['prefixes']} shared prefixes ({g['prefix_tokens_reused']} prompt tokens not prefilled again), "
                     f"prefill {g['prefill_seconds']:.1f} s + decode {g['decode_seconds']:.1f} s ({g['decode_row_steps']} "
                     f"row steps for {g['new_tokens']} new tokens), MFU {100 * g['mfu']:.1f}%")
    return lines


def scaling(arguments: list[str], counts: list[int]) -> dict:
    """`bench --devices 1,2,...`: the same bench once per device count, each in a fresh process
    (a JAX process fixes its devices when it starts): BABELEVAL_CPU_DEVICES=n on a CPU host,
    CUDA_VISIBLE_DEVICES / TPU_VISIBLE_CHIPS = the first n elsewhere. arguments: the bench
    command's own (without --devices and --output). Returns every run and, per engine, the
    requests/s and the speed-up and efficiency against the smallest count."""
    import json
    import os
    import subprocess
    import sys
    import tempfile

    runs = []
    for n in counts:
        with tempfile.TemporaryDirectory() as folder:
            out = Path(folder) / "bench.json"
            first = ",".join(map(str, range(n)))
            env = {**os.environ, "BABELEVAL_CPU_DEVICES": str(n), "CUDA_VISIBLE_DEVICES": first, "TPU_VISIBLE_CHIPS": first}
            if "host_platform_device_count" in env.get("XLA_FLAGS", ""):
                env["XLA_FLAGS"] = " ".join(f for f in env["XLA_FLAGS"].split() if "host_platform_device_count" not in f)
            done = subprocess.run([sys.executable, "-m", "babeleval.cli.main", "bench", *arguments, "--output", str(out)],
                                  env=env, capture_output=True, text=True)
            if done.returncode != 0:
                raise BabelevalError(f"bench on {n} device(s) failed:\n{(done.stderr or done.stdout)[-2000:]}")
            runs.append(json.loads(out.read_text()))
    table = {}
    for engine in ("scoring", "generation"):
        rates = [run[engine]["requests_per_second"] for run in runs if engine in run]
        if len(rates) == len(runs):
            got = [run["devices"]["local_devices"] for run in runs]
            table[engine] = [{"devices": d, "requests_per_second": r, "speedup": r / rates[0],
                              "efficiency": r / rates[0] * got[0] / d} for d, r in zip(got, rates)]
    return {"runs": runs, "scaling": table}


def scaling_lines(result: dict) -> list[str]:
    lines = []
    for engine, rows in result["scaling"].items():
        cells = ", ".join(f"{r['devices']}: {r['requests_per_second']:.2f} req/s ({r['speedup']:.2f}x, "
                          f"{100 * r['efficiency']:.0f}% efficient)" for r in rows)
        lines.append(f"{engine} by devices: {cells}")
    return lines
