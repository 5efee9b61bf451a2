"""Shared fixtures of the torch-nki pytest suite.

Reference implementations and tolerances live in ``refs.py`` (importable from every test module:
pytest puts this directory on ``sys.path``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

import torch_nki


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
