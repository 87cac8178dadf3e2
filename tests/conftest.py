import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=2")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).parent))

from module_coverage import pytest_configure, pytest_sessionfinish  # noqa: E402,F401 - the default tier's check

# What the install fetched into the user's cache and the tests only read.
ASSETS = ("npm", "gemma3-270m-q4_k_m.gguf")


def _test_cache() -> Path:
    """The tests' own $BABELEVAL_CACHE: compiled programs, embeddings and converted models start
    empty (what CI and a newcomer pay, not a developer's warm cache) and never reach the user's;
    the installed assets are linked in. BABELEVAL_TEST_CACHE names a folder to keep across runs
    (.ci/run shares one between the two tiers)."""
    user = Path(os.environ.get("BABELEVAL_CACHE", Path.home() / ".cache" / "babeleval"))
    kept = os.environ.get("BABELEVAL_TEST_CACHE")
    path = Path(kept or tempfile.mkdtemp(prefix="babeleval-tests-"))
    path.mkdir(parents=True, exist_ok=True)
    if not kept:
        atexit.register(shutil.rmtree, path, ignore_errors=True)
    for name in ASSETS:
        if (user / name).exists() and not (path / name).exists() and user.resolve() != path.resolve():
            (path / name).symlink_to((user / name).resolve())
    return path


os.environ["BABELEVAL_CACHE"] = str(_test_cache())

# The default tier reads the slices in the repository (tests/data: the first rows of each file it
# needs, made by tests/data/make_slices.py), with or without ../shared beside the checkout; the
# full tier's tests that need the whole files ask for `shared_data`.
DATA = Path(__file__).resolve().parent / "data"
SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"
os.environ["BABELEVAL_DATA"] = str(DATA)  # the data root for tasks and corpora that read files (workers inherit it)
REQUIRE_DATA = "BABELEVAL_REQUIRE_DATA"  # set (.ci/run): missing full-tier data fails instead of skipping


@pytest.fixture(scope="session")
def data_slices() -> Path:
    """tests/data: the default tier's benchmark slices, in the originals' layout and formats."""
    return DATA


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """../shared/data beside the checkout: the whole benchmark files (full tier). Missing, each test
    asking for it skips naming the path, or fails where BABELEVAL_REQUIRE_DATA is set."""
    if not SHARED.is_dir():
        message = f"{SHARED} is missing (the full benchmark files beside the checkout)"
        if os.environ.get(REQUIRE_DATA):
            pytest.fail(f"{message}; {REQUIRE_DATA} is set", pytrace=False)
        pytest.skip(message)
    return SHARED


@pytest.fixture(scope="session")
def tiny_smollm2(tmp_path_factory) -> Path:
    """A random decoder shaped as SmolLM2-135M, with its tokenizer (tiny_models.SHAPED): an HF folder."""
    from tiny_models import build_shaped

    folder = tmp_path_factory.mktemp("tiny-smollm2")
    build_shaped("smollm2", folder)
    return folder


def pytest_collection_modifyitems(items):
    """tests/test_mesh.py first: its workers hold up to 8 copies of the weights (8 virtual CPU
    devices are one host's memory), best started while this process is still small (by the
    end of the suite it holds ~12 GB of models and programs)."""
    items.sort(key=lambda item: item.path.name != "test_mesh.py")
