"""Data parallelism: 2 local devices give the 1-device results; the engine gives JAX one CPU
device per core unless the user chose. (Two jax.distributed processes: tests/test_mesh.py.)"""
import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

WORKER = Path(__file__).parent / "score_worker.py"


def _spawn(out: Path, data: Path, devices: int, model: Path):
    env = dict(os.environ, XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}")
    return subprocess.Popen([sys.executable, str(WORKER), str(out), str(data), str(model)], env=env)


@pytest.mark.full  # 1 vs 2 devices in their own processes
def test_two_devices_equal_one_device(shared_data, tmp_path, tiny_smollm2):
    """The default placement (every local device on the data axis) against one device, on a random
    decoder shaped as SmolLM2 with its tokenizer. (Two jax.distributed processes splitting the
    work: tests/test_mesh.py, data=2,model=2.)"""
    assert jax.local_device_count() == 2  # conftest asks XLA for two CPU devices
    one = _spawn(tmp_path / "one.json", shared_data, 1, tiny_smollm2)
    two = _spawn(tmp_path / "two.json", shared_data, 2, tiny_smollm2)
    assert (one.wait(timeout=600), two.wait(timeout=600)) == (0, 0)
    a, b = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("one", "two"))
    assert (a["devices"], b["devices"]) == (1, 2) and a["rows"] == b["rows"] > 0
    np.testing.assert_allclose(a["logprob"], b["logprob"], atol=1e-4)
    assert a["texts"] == b["texts"] and a["generated"]


def _fresh_python(code: str, **env) -> subprocess.CompletedProcess:
    """code in a new interpreter whose environment names no device count or XLA flags but env's."""
    clean = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_NUM_CPU_DEVICES", "BABELEVAL_CPU_DEVICES")}
    return subprocess.run([sys.executable, "-c", code], env={**clean, **env}, capture_output=True, text=True, timeout=120)


def _device_count(imports: str = "babeleval.engine", **env) -> subprocess.CompletedProcess:
    return _fresh_python(f"import {imports}, jax; print(jax.local_device_count())", **env)


@pytest.mark.full
def test_cpu_devices_per_core_unless_the_user_chose():
    cores = len(os.sched_getaffinity(0))
    assert _device_count().stdout.strip() == str(min(cores, 4))  # the engine splits the cores
    assert _device_count("babeleval, babeleval.tasks.files, babeleval.metrics.chrf").stdout.strip() == "1"  # no side effect
    assert _device_count("babeleval.models").stdout.strip() == "1"  # models do not reach up into the engine
    assert _device_count(BABELEVAL_CPU_DEVICES="3").stdout.strip() == "3"
    assert _device_count(XLA_FLAGS="--xla_force_host_platform_device_count=1").stdout.strip() == "1"
    bad = _device_count(BABELEVAL_CPU_DEVICES="two")
    assert bad.returncode != 0 and "BABELEVAL_CPU_DEVICES='two'" in bad.stderr


def _xla_flags(**env) -> str:
    done = _fresh_python("import os, babeleval.engine, jax; jax.devices(); print(os.environ.get('XLA_FLAGS', ''))", **env)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_cpu_compiler_flags_unless_the_user_set_them():
    """The engine sets XLA's CPU flags that keep scoring's memory at the weights and one layer's
    temporaries (devices.CPU_FLAGS: bench/gguf_8b.py), each unless XLA_FLAGS names it."""
    assert set(_xla_flags().split()) == {"--xla_cpu_enable_concurrency_optimized_scheduler=false",
                                         "--xla_cpu_experimental_ynn_fusion_type=individual_dot"}
    assert set(_xla_flags(XLA_FLAGS="--xla_cpu_enable_concurrency_optimized_scheduler=true").split()) == {
        "--xla_cpu_enable_concurrency_optimized_scheduler=true", "--xla_cpu_experimental_ynn_fusion_type=individual_dot"}


def test_an_auto_mesh_does_not_replicate_weights_beyond_a_share_of_host_memory():
    """CPU devices share the host's memory: an auto mesh replicates the weights on each one while
    the copies take at most CPU_REPLICAS_SHARE of it, else it takes one device (an 8B model
    planned at 32 GB on a 24 GiB host); an explicit mesh is kept."""
    from babeleval.placement.devices import CPU_REPLICAS_SHARE, host_memory, make_mesh

    count = jax.local_device_count()
    assert count == 2  # conftest asks XLA for two CPU devices
    fits = int(CPU_REPLICAS_SHARE * host_memory() / count)
    assert dict(make_mesh("auto", fits).shape) == {"data": count, "model": 1}
    assert dict(make_mesh("auto", fits + 1).shape) == {"data": 1, "model": 1}
    assert dict(make_mesh(None, 32 << 30).shape) == {"data": 1, "model": 1}
    assert dict(make_mesh("data=2,model=1", 32 << 30).shape) == {"data": 2, "model": 1}
