"""Type stubs of the native module (python/src/)."""

from collections.abc import Sequence

Scalar = float | int | bool
Buffer = tuple[int, Sequence[int], str]

class NkiError(RuntimeError):
    """A kernel failed to trace, validate or simulate."""

def manifest() -> str: ...
def names() -> list[str]: ...
def check(
    name: str, shapes: Sequence[Sequence[int]], dtypes: Sequence[str], scalars: Sequence[Scalar]
) -> list[tuple[tuple[int, ...], str]]: ...
def run(
    name: str, inputs: Sequence[Buffer], scalars: Sequence[Scalar], outputs: Sequence[Buffer]
) -> None: ...
def cache_size() -> int: ...
def tolerance(
    name: str, shapes: Sequence[Sequence[int]], dtypes: Sequence[str], scalars: Sequence[Scalar]
) -> list[tuple[float, float] | None]: ...
