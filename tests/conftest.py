"""What every test run shares: its own compile caches.

The compile drivers cache reports and binaries under `$KIR_CACHE_DIR` (default `~/.cache/kir`,
shared by every process of the user) and Triton its own under `$TRITON_CACHE_DIR`; a test run
that read the user's caches could pass or fail on what an earlier run, of other code, left there.
So a run points both at a fresh temporary folder when it is configured, before any test module is
imported, and removes it at the end. pytest-xdist's workers inherit the controller's environment:
the workers of one run share one cache (each kernel is compiled once a run), and only the
controller creates and removes it. `KIR_TEST_KEEP_CACHE=1` keeps the caches the environment names
(to rerun quickly against a warm cache, or to look at what a run compiled).
"""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest

_KEY = pytest.StashKey[tuple[str, dict[str, str | None]]]()
CACHE_VARIABLES = ("KIR_CACHE_DIR", "TRITON_CACHE_DIR")


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput") or os.environ.get("KIR_TEST_KEEP_CACHE") == "1":
        return
    root = tempfile.mkdtemp(prefix="kir-test-cache-")
    config.stash[_KEY] = (root, {name: os.environ.get(name) for name in CACHE_VARIABLES})
    os.environ["KIR_CACHE_DIR"] = os.path.join(root, "kir")
    os.environ["TRITON_CACHE_DIR"] = os.path.join(root, "triton")


def pytest_unconfigure(config: pytest.Config) -> None:
    if _KEY not in config.stash:
        return
    root, saved = config.stash[_KEY]
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    shutil.rmtree(root, ignore_errors=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked `full_only` run only in the full-size run (`KIR_TESTS=full`)."""
    from tests.budget import FULL

    if FULL:
        return
    skip = pytest.mark.skip(reason="full-size run only (KIR_TESTS=full)")
    for item in items:
        if "full_only" in item.keywords:
            item.add_marker(skip)
