"""The NKI 0.7 API as the native module declares it (``nki_spec``, declared once in Rust):
instructions, enums, the ``nki.language`` vocabulary, and the operators and activation
functions the simulator implements. ``isa``, ``language`` and ``coverage`` are built from it."""

from __future__ import annotations

import json
from typing import Any

from torch_nki import _native

SPEC: dict[str, Any] = json.loads(_native.nki_spec_json())
"""The whole declaration, as the native module exports it."""
