"""The exceptions torch-nki raises. :class:`NkiError` is the base of all of them.

Contract violations are also the built-in exception a caller expects: a shape problem is a
:class:`ContractShapeError` (a ``ValueError``), a dtype problem a :class:`ContractDtypeError` (a
``TypeError``). Validation errors carry the rule, the limit, the actual value and the kernel
source line as attributes. Every message is worded by the Rust side and names the op.
"""

from __future__ import annotations

__all__ = [
    "ContractDtypeError",
    "ContractError",
    "ContractIndexError",
    "ContractShapeError",
    "NkiError",
    "NoBackwardError",
    "SimulationError",
    "TraceError",
    "UnknownOpError",
    "UnsupportedTransformError",
    "ValidationError",
    "ValidationWarning",
]


class NkiError(RuntimeError):
    """A torch-nki op failed: its arguments break the contract, or its kernel failed to trace,
    validate or simulate. The message names the op (and the kernel source line where one
    applies)."""

    op: str | None = None
    """The op's name (``rmsnorm``), when the error is about one op."""


class ContractError(NkiError):
    """The arguments break the op's shape or dtype contract."""

    param: str | None = None
    """The parameter the violation is about, when it is about one."""


class ContractShapeError(ContractError, ValueError):
    """A shape, rank or ``require(...)`` violation."""


class ContractDtypeError(ContractError, TypeError):
    """A dtype the contract does not allow."""


class ContractIndexError(ContractError, IndexError):
    """An integer input holds a value outside the indices the kernel takes (a class target
    out of range), or one that does not fit the kernel's ``int32`` (an ``int64`` input)."""


class TraceError(NkiError):
    """The kernel body did something the tile language rejects while tracing (including an
    output it never fully writes, or outputs that break its contract)."""

    location: str | None = None
    """The kernel source line, ``file:line``."""


class ValidationError(NkiError):
    """The traced program breaks a hardware constraint of the target."""

    rule: str = ""
    """The rule's name, e.g. ``sbuf-capacity``."""
    limit: str = ""
    """The limit the rule enforces."""
    actual: str = ""
    """The offending value."""
    instruction: str = ""
    """The instruction (or ``alloc``) that broke it."""
    location: str = ""
    """The kernel source line, ``file:line``."""


class ValidationWarning(UserWarning):
    """Validation could not decide a rule either way (e.g. ``affine-range-dependence`` for an
    ``affine_range`` whose iterations reach a tensor at runtime offsets): the program is
    accepted; the message names the rule, the line and what was not proven."""


class SimulationError(NkiError):
    """Executing the program failed."""

    location: str | None = None
    """The kernel source line, ``file:line``."""


class NoBackwardError(NkiError):
    """A gradient was requested through an op that declares no backward kernel."""


class UnsupportedTransformError(NkiError):
    """Forward-mode AD or a ``torch.func`` autograd transform was used through an op that
    cannot support it (the message says why and what to use instead)."""


class UnknownOpError(NkiError, KeyError):
    """No registered kernel has the name asked for (``torch_nki.cost``, ``emit``, the testing
    helpers). Also a ``KeyError``, as a failed lookup by name; its message reads plainly."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class PluginError(NkiError):
    """A kernel module cannot be loaded: the crate does not build (or cargo is missing), the
    library file is damaged (truncated, not a shared library for this machine) or not a
    torch-nki kernel module, it was built against another nki-core, another library is already
    loaded under its module name, or one of its op names is already registered."""
