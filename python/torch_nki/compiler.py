"""``torch.compile(model, backend="nki")``: rewrite the captured graph's patterns into neuron ops
wherever their contracts accept the shapes, then compile the graph with Inductor.

The backend is registered through the ``torch_dynamo_backends`` entry point. It works on the graph
Dynamo captures (torch-level calls with fake example values on every node) and applies every
registered :class:`Pattern` in the order they were registered. :func:`register_pattern` teaches
it a pattern; the built-in ones (:mod:`torch_nki._graph_patterns`) are registered the same way,
first, so a pattern registered later sees their rewrites (it can fuse a ``neuron.rmsnorm`` with
what surrounds it):

* ``F.linear(x, w, b)`` and ``torch.addmm(b, x, w)`` (1-D bias) → ``neuron.linear``;
  ``torch.matmul`` / ``torch.mm`` / ``@`` with a 2-D right operand → ``neuron.matmul``;
* ``silu(a) * b`` → ``neuron.silu_mul``; ``gelu(a, approximate=...) * b`` → ``neuron.gelu_mul``;
* ``softmax`` over the last dim → ``neuron.softmax``;
* RMSNorm's decomposition ``w * (h * rsqrt(h.pow(2).mean(-1, keepdim=True) + eps))`` (with the
  fp32 casts transformers inserts) → ``neuron.rmsnorm``;
* the rotary pattern ``t * cos + cat((-t[..., h:], t[..., :h]), -1) * sin`` of a query and a key
  sharing ``cos``/``sin`` → one ``neuron.rope``;
* ``scaled_dot_product_attention`` without dropout, unmasked or with a mask that depends on no
  graph input and evaluates to exactly the causal mask → ``neuron.flash_attention``.

A pattern is rewritten only when the replacement's contract accepts the example shapes and
dtypes (checked by calling the op on meta tensors) and the replaced intermediate values have no
other users. Every decision is logged (``torch_nki.compiler.last_log()``, and the
``torch_nki.compiler`` logger).
"""

from __future__ import annotations

import logging
import operator
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

import torch
from torch import fx

from torch_nki._extension_checks import check_kernels

__all__ = [
    "Pattern",
    "Rewrite",
    "Rewriter",
    "last_log",
    "nki_backend",
    "patterns",
    "register_pattern",
    "rewrite",
    "unregister_pattern",
]

logger = logging.getLogger(__name__)
neuron = torch.ops.neuron


@dataclass(frozen=True)
class Rewrite:
    """One decision of the rewriter."""

    pattern: str
    node: str
    rewritten: bool
    reason: str = ""


_LAST: list[Rewrite] = []


def last_log() -> list[Rewrite]:
    """The decisions of the most recent graph the backend compiled."""
    return list(_LAST)


def _value(node: Any) -> Any:
    return node.meta.get("example_value") if isinstance(node, fx.Node) else node


def _meta(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return torch.empty(tuple(int(d) for d in value.shape), dtype=value.dtype, device="meta")
    return value


def _accepts(op: Callable[..., Any], args: Sequence[Any]) -> str | None:
    """``None`` when ``op`` accepts the example values of ``args``, else the reason."""
    values = [_value(a) for a in args]
    if any(isinstance(v, torch.Tensor) and not all(isinstance(d, int) for d in v.shape) for v in values):
        return "symbolic shapes are left to Inductor"
    try:
        op(*(_meta(v) for v in values))
    except Exception as err:  # the contract's own message
        return str(err).splitlines()[0]
    return None


def _is(node: object, *targets: object) -> TypeGuard[fx.Node]:
    return isinstance(node, fx.Node) and node.op == "call_function" and node.target in targets


def _is_method(node: object, name: str) -> TypeGuard[fx.Node]:
    return isinstance(node, fx.Node) and node.op == "call_method" and node.target == name


_MUL = (operator.mul, torch.mul)
_ADD = (operator.add, torch.add)


def _replace(
    gm: fx.GraphModule, node: fx.Node, op: Any, args: tuple[Any, ...], take: int | None = None
) -> None:
    with gm.graph.inserting_before(node):
        new = gm.graph.call_function(op, args)
        if take is not None:
            new = gm.graph.call_function(operator.getitem, (new, take))
    new.meta = dict(node.meta)
    node.replace_all_uses_with(new)
    gm.graph.erase_node(node)


def _only_user(node: Any, user: fx.Node) -> bool:
    return isinstance(node, fx.Node) and list(node.users) == [user]


class Rewriter:
    """One graph being rewritten: what a :class:`Pattern`'s ``rewrite`` works on. It finds its
    matches (:meth:`calls`, :meth:`value`, :meth:`is_call`, :meth:`only_user`) and replaces each
    with :meth:`attempt`, which checks the op's contract on the example values first and logs
    the decision; :meth:`keep` logs a match left alone, with the reason."""

    def __init__(self, gm: fx.GraphModule) -> None:
        self.gm = gm
        """The graph module (``gm.graph`` is edited in place)."""
        self.log: list[Rewrite] = []
        """The decisions so far."""
        self.pattern = ""
        """The name of the pattern being applied (what :meth:`attempt` and :meth:`keep` log)."""

    @property
    def graph(self) -> fx.Graph:
        """The graph being rewritten."""
        return self.gm.graph

    def calls(self, *targets: object) -> Iterator[fx.Node]:
        """The ``call_function`` nodes (of one of ``targets``, when given), in graph order; nodes
        erased while iterating are skipped."""
        for node in list(self.graph.nodes):
            live = node.op == "call_function" and not getattr(node, "_erased", False)
            if live and (not targets or node.target in targets):
                yield node

    @staticmethod
    def value(node: Any) -> Any:
        """The example value of a node (a fake tensor, with its shape and dtype), or a constant."""
        return _value(node)

    @staticmethod
    def is_call(node: object, *targets: object) -> TypeGuard[fx.Node]:
        """Whether ``node`` is a call of one of ``targets`` (``F.silu``, ``operator.mul``, ...)."""
        return _is(node, *targets)

    @staticmethod
    def only_user(node: Any, user: fx.Node) -> bool:
        """Whether ``user`` is the only user of ``node`` (so replacing ``user`` frees it)."""
        return _only_user(node, user)

    def attempt(self, node: fx.Node, op: Any, args: tuple[Any, ...], take: int | None = None) -> bool:
        """Replaces ``node`` with ``op(*args)`` (its output ``take`` when given) if ``op``'s
        contract accepts the example values of ``args``; logs the decision either way."""
        reason = _accepts(op, args)
        if reason is not None:
            self.keep(node, reason)
            return False
        _replace(self.gm, node, op, args, take)
        self.log.append(Rewrite(self.pattern, node.name, True))
        return True

    def keep(self, node: fx.Node, reason: str) -> None:
        """Logs a match of the current pattern at ``node`` left as it is, and why."""
        self.log.append(Rewrite(self.pattern, node.name, False, reason))

    def erase_unused(self, *nodes: fx.Node) -> None:
        """Erases those of ``nodes`` nobody uses any more (a replaced match's intermediates), in
        the order given (users before what they use)."""
        for node in nodes:
            if not node.users and not getattr(node, "_erased", False):
                self.graph.erase_node(node)


@dataclass(frozen=True)
class Pattern:
    """A graph pattern the ``nki`` backend rewrites into neuron ops (see :func:`register_pattern`)."""

    name: str
    """What the log calls it (``silu(a) * b``)."""
    kernels: tuple[str, ...]
    """The ops it rewrites into, by name (``name`` in ``neuron``, ``ns::name`` elsewhere)."""
    rewrite: Callable[[Rewriter], None]
    """Finds the pattern's matches in ``rewriter.graph`` and replaces each through
    :meth:`Rewriter.attempt` (or logs it kept with :meth:`Rewriter.keep`)."""


_lock = threading.Lock()
_PATTERNS: list[Pattern] = []
"""Every registered pattern, in the order they are applied (the order of registration)."""


def register_pattern(pattern: Pattern) -> Pattern:
    """Teaches ``backend="nki"`` a graph pattern, applied after those registered earlier (it
    sees their rewrites: the built-in patterns have turned what they match into neuron ops);
    returns it. Its kernels must be registered ops (load a crate with :func:`torch_nki.load`
    first). A name already registered is a ``ValueError`` (:func:`unregister_pattern` it first),
    a field of the wrong type a ``TypeError`` and an unknown kernel an
    :class:`~torch_nki.errors.UnknownOpError`, each naming the pattern."""
    where = f"torch_nki.compiler.register_pattern({getattr(pattern, 'name', pattern)!r})"
    if not isinstance(pattern, Pattern):
        raise TypeError(
            f"torch_nki.compiler.register_pattern: expected a Pattern, got {type(pattern).__name__}"
        )
    if not isinstance(pattern.name, str) or not pattern.name:
        raise TypeError(f"{where}: name must be a non-empty str")
    if not callable(pattern.rewrite):
        raise TypeError(f"{where}: rewrite must be callable")
    check_kernels(where, pattern.kernels)
    with _lock:
        if any(p.name == pattern.name for p in _PATTERNS):
            raise ValueError(f"{where}: a pattern of that name is already registered; unregister it first")
        _PATTERNS.append(pattern)
    return pattern


def unregister_pattern(name: str) -> Pattern:
    """Removes the pattern named ``name`` (a ``KeyError`` naming the registered ones otherwise)
    and returns it."""
    with _lock:
        for i, pattern in enumerate(_PATTERNS):
            if pattern.name == name:
                return _PATTERNS.pop(i)
    names = [p.name for p in _PATTERNS]
    raise KeyError(f"torch_nki.compiler.unregister_pattern: no pattern {name!r} (registered: {names})")


def patterns() -> tuple[Pattern, ...]:
    """Every registered pattern, in the order they are applied."""
    with _lock:
        return tuple(_PATTERNS)


def rewrite(gm: fx.GraphModule) -> list[Rewrite]:
    """Rewrites ``gm`` in place with every registered pattern (see the module doc); returns the
    decisions."""
    rewriter = Rewriter(gm)
    for pattern in patterns():
        rewriter.pattern = pattern.name
        pattern.rewrite(rewriter)
    gm.graph.eliminate_dead_code()
    gm.graph.lint()
    gm.recompile()
    return rewriter.log


def nki_backend(gm: fx.GraphModule, example_inputs: list[Any], **kwargs: Any) -> Callable[..., Any]:
    """The ``nki`` Dynamo backend: :func:`rewrite`, then Inductor."""
    from torch._inductor.compile_fx import compile_fx

    import torch_nki  # noqa: F401  (registers torch.ops.neuron when loaded through the entry point)

    decisions = rewrite(gm)
    _LAST[:] = decisions
    for d in decisions:
        logger.info("%s at %s: %s", d.pattern, d.node, "rewritten" if d.rewritten else f"kept ({d.reason})")
    compiled = compile_fx(gm, example_inputs)
    # Its annotation also covers AOT compilation's outputs (paths, weights).
    assert callable(compiled), "compile_fx returns a callable outside AOT compilation"
    return compiled


# The built-in patterns register themselves through `register_pattern`.
from torch_nki import _graph_patterns  # noqa: E402, F401
