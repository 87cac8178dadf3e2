"""Data parallelism: 2 local devices give the 1-device results, and two jax.distributed
processes on 127.0.0.1 split the work (scoring and generation) and give the single-process
results."""
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

WORKER = Path(__file__).parent / "score_worker.py"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _spawn(out: Path, data: Path, devices: int, process_id=0, processes=1, port=0):
    env = dict(os.environ, XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}")
    return subprocess.Popen([sys.executable, str(WORKER), str(out), str(data), str(process_id), str(processes), str(port)],
                            env=env)


@pytest.fixture(scope="module")
def one_device(shared_data, tmp_path_factory) -> dict:
    """One process on one device: the reference both tests compare with (computed once)."""
    out = tmp_path_factory.mktemp("one") / "one.json"
    assert _spawn(out, shared_data, 1).wait(timeout=600) == 0
    return json.loads(out.read_text())


def test_two_devices_equal_one_device(shared_data, tmp_path, one_device):
    assert jax.local_device_count() == 2  # conftest asks XLA for two CPU devices
    assert _spawn(tmp_path / "two.json", shared_data, 2).wait(timeout=600) == 0
    a, b = one_device, json.loads((tmp_path / "two.json").read_text())
    assert (a["devices"], b["devices"]) == (1, 2)
    np.testing.assert_allclose(a["logprob"], b["logprob"], atol=1e-4)
    assert a["texts"] == b["texts"]


def test_two_processes_split_requests_and_agree(shared_data, tmp_path, one_device):
    port = _free_port()
    procs = [_spawn(tmp_path / f"p{i}.json", shared_data, 1, i, 2, port) for i in range(2)]
    assert all(p.wait(timeout=600) == 0 for p in procs)
    outs = [json.loads((tmp_path / f"p{i}.json").read_text()) for i in range(2)]
    ref = one_device
    assert all(o["processes"] == 2 for o in outs) and ref["processes"] == 1
    assert outs[0]["rows"] + outs[1]["rows"] == ref["rows"] and min(o["rows"] for o in outs) > 0
    for o in outs:
        np.testing.assert_allclose(o["logprob"], ref["logprob"], atol=1e-4)
        assert o["texts"] == ref["texts"] and o["generated"]  # each generated its share, all got all


def _device_count(imports: str = "babeleval.engine", **env) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_NUM_CPU_DEVICES", "BABELEVAL_CPU_DEVICES")}
    return subprocess.run([sys.executable, "-c", f"import {imports}, jax; print(jax.local_device_count())"],
                          env={**clean, **env}, capture_output=True, text=True, timeout=120)


def test_cpu_devices_per_core_unless_the_user_chose():
    cores = len(os.sched_getaffinity(0))
    assert _device_count().stdout.strip() == str(min(cores, 4))  # the engine splits the cores
    assert _device_count("babeleval, babeleval.tasks.files, babeleval.metrics.chrf").stdout.strip() == "1"  # no side effect
    assert _device_count("babeleval.models").stdout.strip() == "1"  # models do not reach up into the engine
    assert _device_count(BABELEVAL_CPU_DEVICES="3").stdout.strip() == "3"
    assert _device_count(XLA_FLAGS="--xla_force_host_platform_device_count=1").stdout.strip() == "1"
    bad = _device_count(BABELEVAL_CPU_DEVICES="two")
    assert bad.returncode != 0 and "BABELEVAL_CPU_DEVICES='two'" in bad.stderr
