"""Shared fixtures of the torch-nki pytest suite.

Reference implementations and tolerances live in ``refs.py`` (importable from every test module:
pytest puts this directory on ``sys.path``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import torch

import torch_nki


@pytest.fixture(autouse=True, scope="session")
def _private_source_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Keep the suite's NKI source cache out of the user's cache directory."""
    before = os.environ.get("TORCH_NKI_CACHE_DIR")
    os.environ["TORCH_NKI_CACHE_DIR"] = str(tmp_path_factory.mktemp("nki-source-cache"))
    yield
    if before is None:
        del os.environ["TORCH_NKI_CACHE_DIR"]
    else:
        os.environ["TORCH_NKI_CACHE_DIR"] = before


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


@pytest.fixture
def dynamo() -> Iterator[None]:
    """A clean torch.compile state before and after the test."""
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.fixture
def fresh_warnings() -> Iterator[None]:
    """Forget the one-time downcast warnings so a test can observe them."""
    torch_nki._dtypes.reset_warnings()
    yield
    torch_nki._dtypes.reset_warnings()
