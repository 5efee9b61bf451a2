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
def _private_caches(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Keep the suite's NKI source cache and torch.compile's on-disk caches out of the user's
    cache directories. Inductor's caches key compiled graphs on the forward graph: a backward
    kernel whose signature changed under an unchanged forward would otherwise be served stale
    compiled code from an earlier build."""
    names = {"TORCH_NKI_CACHE_DIR": "nki-source-cache", "TORCHINDUCTOR_CACHE_DIR": "inductor-cache"}
    before = {name: os.environ.get(name) for name in names}
    for name, directory in names.items():
        os.environ[name] = str(tmp_path_factory.mktemp(directory))
    yield
    for name, value in before.items():
        if value is None:
            del os.environ[name]
        else:
            os.environ[name] = value


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
