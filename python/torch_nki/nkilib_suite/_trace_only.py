"""A stand-in for the Neuron compiler's ``nki.compiler.frontend``, for nki-library's
``trace_only`` tests.

Tests marked ``trace_only`` run in that mode whatever the session's mode is: the framework
(``test/utils/kernel_tracer.py``) hands the kernel and its inputs to
``ParserFrontend().compile(...)``, the compiler's Python-to-MLIR step, and passes when it
returns. Here ``compile`` traces the kernel with torch-nki for the target and LNC degree
given (the kernel's ``kernel_assert`` checks and every trace error apply) and validates the
program (validation errors raise); there is no MLIR, so the result's ``module`` is ``None``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from torch_nki import nki as frontend


@dataclass
class TracedKernel:
    """What :meth:`NKIFrontend.compile` returns: the traced program (the compiler's MLIR
    module has no counterpart here)."""

    program: Any
    """The torch-nki program (``torch_nki.nki.Program``)."""
    module: None = None


class NKIFrontend:
    """The compiler frontend interface: :meth:`compile` traces a kernel for a target."""

    def compile(
        self,
        kernel: Any,
        inputs: dict[str, Any] | None = None,
        target: str = "trn2",
        lnc: int = 1,
        artifacts_dir: str | None = None,
        dump_python_ast: bool = False,
        output_names: list[str] | None = None,
    ) -> TracedKernel:
        """Traces ``kernel`` on ``inputs`` (by keyword) for ``target`` on ``lnc`` cores and
        validates the program; returns it. ``artifacts_dir``, ``dump_python_ast`` and
        ``output_names`` concern the compiler's artifacts and are ignored."""
        jit = kernel if isinstance(kernel, frontend.Kernel) else frontend.Kernel(kernel)
        launch: Any = jit[lnc] if lnc > 1 else jit
        program = launch.trace(target=str(target), **(inputs or {}))
        program.validate()
        return TracedKernel(program)


class ParserFrontend(NKIFrontend):
    """The frontend nki-library's tracer uses (``ParserFrontend()``)."""


class TracerFrontend(NKIFrontend):
    """The compiler's other frontend; the same here."""
