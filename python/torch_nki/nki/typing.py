"""``nki.typing`` (``nt``): the annotations NKI kernels put on their parameters,
``nt.tensor[shape, dtype]`` (an input tensor) and ``nt.mutable_tensor[shape, dtype]`` (a tensor
the kernel writes in place), and the element types under their ``nl`` names
(``nt.float8_e4m3``). Annotations document a kernel; the frontend does not check them (the
arrays passed in decide shapes and dtypes)."""

from __future__ import annotations

from typing import Any

from torch_nki.nki.language import DTYPES


class _Annotation:
    """A subscriptable annotation: ``nt.tensor``, ``nt.tensor[(128, 512), nl.float32]``."""

    def __init__(self, name: str, args: tuple[Any, ...] = ()) -> None:
        self.name = name
        self.args = args

    def __getitem__(self, args: Any) -> _Annotation:
        return _Annotation(self.name, args if isinstance(args, tuple) else (args,))

    def __repr__(self) -> str:
        inside = ", ".join(repr(a) for a in self.args)
        return f"nt.{self.name}[{inside}]" if self.args else f"nt.{self.name}"


tensor = _Annotation("tensor")
"""An input tensor: ``nt.tensor[shape, dtype]``."""

mutable_tensor = _Annotation("mutable_tensor")
"""A tensor the kernel writes in place: ``nt.mutable_tensor[shape, dtype]``."""

globals().update({d.nki_name: d for d in DTYPES})
