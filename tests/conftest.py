import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=2")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).parent))

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"
os.environ.setdefault("BABELEVAL_DATA", str(SHARED))  # the data root for tasks and corpora that read files


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED.exists():
        pytest.fail(f"{SHARED} is missing: the real benchmark data must sit beside the checkout")
    return SHARED


@pytest.fixture(scope="session")
def cache(tmp_path_factory) -> Path:
    path = Path(os.environ.get("BABELEVAL_TEST_CACHE", Path(__file__).resolve().parents[1] / ".cache"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def pytest_collection_modifyitems(items):
    """tests/test_mesh.py first: its workers hold up to 8 copies of the weights (8 virtual CPU
    devices are one host's memory), best started while this process is still small (by the
    end of the suite it holds ~12 GB of models and programs)."""
    items.sort(key=lambda item: item.path.name != "test_mesh.py")
