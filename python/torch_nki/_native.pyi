"""Type stubs of the native module (python/native/src/)."""

from collections.abc import Sequence

from torch import Tensor

Scalar = float | int | bool

def manifest() -> str: ...
def names() -> list[str]: ...
def check(
    name: str,
    shapes: Sequence[Sequence[int] | None],
    dtypes: Sequence[str | None],
    scalars: Sequence[Scalar],
) -> list[tuple[tuple[int, ...], str]]: ...
def run(
    name: str, inputs: Sequence[Tensor | None], scalars: Sequence[Scalar], outputs: Sequence[Tensor]
) -> None: ...
def cache_size() -> int: ...
def huge_pages() -> bool: ...

HUGE_PAGES_MIN_BYTES: int

def tolerance(
    name: str,
    shapes: Sequence[Sequence[int] | None],
    dtypes: Sequence[str | None],
    scalars: Sequence[Scalar],
) -> list[tuple[float, float] | None]: ...
def index_domains(
    name: str,
    shapes: Sequence[Sequence[int] | None],
    dtypes: Sequence[str | None],
    scalars: Sequence[Scalar],
) -> list[tuple[int, int, int | None] | None]: ...
def symbolic(
    name: str,
    shapes: Sequence[Sequence[object] | None],
    dtypes: Sequence[str | None],
    scalars: Sequence[object],
) -> str: ...
def _error_example(kind: str) -> None: ...
def cost(
    name: str,
    shapes: Sequence[Sequence[int] | None],
    dtypes: Sequence[str | None],
    scalars: Sequence[Scalar],
    target: str,
) -> tuple[str, str, str]: ...
def emit(
    name: str,
    shapes: Sequence[Sequence[int] | None],
    dtypes: Sequence[str | None],
    scalars: Sequence[Scalar],
    target: str,
) -> tuple[str, str]: ...
def disk_cache_dir() -> str: ...
def disk_cache_info() -> tuple[int, int]: ...
def disk_cache_clear() -> int: ...
