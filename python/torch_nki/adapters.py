"""Module kinds: how a module instance's forward is computed with neuron ops.

An :class:`Adapter` is one **kind** of module: it recognises a module by **structure** (the
parameters and attributes its forward uses) and by the ``replaces`` patterns its first kernel
declares (plus any class-name patterns of its own, :attr:`Adapter.modules`), matched against the
module's qualified class name; no model family is named here. It then computes that forward with
neuron ops, reading the module's parameters at call time (so ``model.to(dtype)`` and
``load_state_dict`` keep working), and returns ``NotImplemented`` for a call it cannot take (a
padding mask, a KV cache that grows past the queries), which the swap turns into a call of the
original forward.

:func:`register_adapter` teaches :func:`torch_nki.swap` and :func:`torch_nki.profile` a kind;
the built-in kinds below are registered through it too: RMSNorm-like modules (``rmsnorm``) and
offset RMSNorms computing ``x̂ · (1 + weight)`` (``rmsnorm`` given ``1 + weight``), ``nn.Linear``
(``linear``, or ``matmul`` on a bias-free weight stored K-major: :attr:`Adapter.k_major`), gated
MLPs with a SiLU gate (``silu_mul`` and ``linear``) or a GELU gate
(``gelu_mul`` and ``linear``) and attention modules with q/k/v/o projections and rotary
embeddings (``linear``, ``rope``, ``flash_attention``). Kinds are tried newest first; when
several recognise a module (an RMSNorm and an offset RMSNorm look alike), the swap keeps the
first one that verifies.
"""

from __future__ import annotations

import fnmatch
import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from torch_nki import testing
from torch_nki._extension_checks import check_kernels
from torch_nki.errors import UnknownOpError

__all__ = [
    "Adapter",
    "adapter_for",
    "adapters",
    "adapters_for",
    "is_k_major",
    "qualified_name",
    "register_adapter",
    "unregister_adapter",
]

neuron = torch.ops.neuron


def qualified_name(module: torch.nn.Module) -> str:
    """``transformers.models.llama.modeling_llama.LlamaRMSNorm``."""
    cls = type(module)
    return f"{cls.__module__}.{cls.__qualname__}"


def _matching(patterns: tuple[str, ...], module: torch.nn.Module) -> str | None:
    """The first of ``patterns`` that matches the module's class, if any."""
    name = qualified_name(module)
    for pattern in patterns:
        if fnmatch.fnmatchcase(name, pattern) or fnmatch.fnmatchcase(type(module).__name__, pattern):
            return pattern
        # `torch.nn.Linear` names the public class, whose instances live in submodules.
        public = (
            getattr(torch.nn, pattern.removeprefix("torch.nn."), None)
            if pattern.startswith("torch.nn.")
            else None
        )
        if isinstance(public, type) and isinstance(module, public):
            return pattern
    return None


def _declared(kernel: str, module: torch.nn.Module) -> str | None:
    """The first ``replaces`` pattern of ``kernel`` that matches the module's class, if any (none
    once the kernel is gone, e.g. its crate unloaded)."""
    try:
        spec = testing.op_spec(kernel)
    except UnknownOpError:
        return None
    return _matching(tuple(spec.replaces), module)


@dataclass(frozen=True)
class Adapter:
    """One kind of module the neuron ops can compute (see :func:`register_adapter`)."""

    kind: str
    """What it replaces, for reports (``RMSNorm``, ``Linear``, ``MLP``, ``Attention``)."""
    kernels: tuple[str, ...]
    """The ops its forward calls, by name (``name`` in ``neuron``, ``ns::name`` for a crate
    loaded elsewhere); the first is the one whose ``replaces`` patterns name the classes it
    takes. Verification holds the forward to their tolerance classes."""
    recognise: Callable[[torch.nn.Module], bool]
    """Whether the module has the structure the forward needs."""
    forward: Callable[..., Any]
    """``forward(module, *args, **kwargs)`` with neuron ops, or ``NotImplemented``."""
    example: Callable[[torch.nn.Module, torch.Generator], tuple[tuple[Any, ...], dict[str, Any]]]
    """``(args, kwargs)`` of a call the forward takes, drawn from ``generator`` on the module's
    device and dtype (its sizes from the module's parameters, as its kernels' contracts bind
    them): what a swap without captured inputs verifies the instance on."""
    composite: bool = False
    """Whether its forward calls child modules (an MLP's projections): such instances are
    swapped after their children, so they call the swapped children."""
    modules: tuple[str, ...] = ()
    """Class-name patterns of its own (``fnmatch``, on the qualified or the bare class name),
    taken besides its first kernel's ``replaces``: for a kind of the user's own modules computed
    by a kernel that does not name them."""
    k_major: Callable[[torch.nn.Module], tuple[str, ...]] | None = None
    """The names of the instance's 2-D parameters its forward reads fastest stored K-major
    (``weight[N, K]`` held as the contiguous ``[K, N]`` it is the transpose of, the layout the
    tensor engine's moving operand has), which :func:`torch_nki.swap` lays out so (see
    ``relayout`` there); ``None``: none. The forward must compute the same values in either
    layout."""

    def matches(self, module: torch.nn.Module) -> str | None:
        """The pattern that names the module's class, when the structure fits too."""
        pattern = _declared(self.kernels[0], module) or _matching(self.modules, module)
        return pattern if pattern is not None and self.recognise(module) else None


_lock = threading.Lock()
_ADAPTERS: list[Adapter] = []
"""Every registered kind, the newest first (the order they are tried in)."""


def register_adapter(adapter: Adapter) -> Adapter:
    """Teaches :func:`torch_nki.swap` (and :func:`torch_nki.profile`) a module kind, tried before
    the kinds registered earlier; returns it. Its kernels must be registered ops (load a crate
    with :func:`torch_nki.load` first). A kind name already registered is a ``ValueError``
    (:func:`unregister_adapter` it first), a field of the wrong type a ``TypeError`` and an
    unknown kernel an :class:`~torch_nki.errors.UnknownOpError`, each naming the kind."""
    where = f"torch_nki.register_adapter({getattr(adapter, 'kind', adapter)!r})"
    if not isinstance(adapter, Adapter):
        raise TypeError(f"torch_nki.register_adapter: expected an Adapter, got {type(adapter).__name__}")
    if not isinstance(adapter.kind, str) or not adapter.kind:
        raise TypeError(f"{where}: kind must be a non-empty str")
    for field in ("recognise", "forward", "example"):
        if not callable(getattr(adapter, field)):
            raise TypeError(f"{where}: {field} must be callable")
    if adapter.k_major is not None and not callable(adapter.k_major):
        raise TypeError(f"{where}: k_major must be callable or None")
    check_kernels(where, adapter.kernels)
    with _lock:
        if any(a.kind == adapter.kind for a in _ADAPTERS):
            raise ValueError(f"{where}: a kind of that name is already registered; unregister it first")
        _ADAPTERS.insert(0, adapter)
    return adapter


def unregister_adapter(kind: str) -> Adapter:
    """Removes the kind named ``kind`` (a ``KeyError`` naming the registered kinds otherwise) and
    returns it. Instances already swapped keep their forward until :func:`torch_nki.unswap`."""
    with _lock:
        for i, adapter in enumerate(_ADAPTERS):
            if adapter.kind == kind:
                return _ADAPTERS.pop(i)
    raise KeyError(
        f"torch_nki.unregister_adapter: no kind {kind!r} (registered: {[a.kind for a in _ADAPTERS]})"
    )


def adapters() -> tuple[Adapter, ...]:
    """Every registered kind, in the order they are tried (the newest first)."""
    with _lock:
        return tuple(_ADAPTERS)


def adapters_for(module: torch.nn.Module) -> list[tuple[Adapter, str]]:
    """Every kind that recognises ``module``, with the pattern that matched, in the order they
    are tried."""
    found = []
    for adapter in adapters():
        pattern = adapter.matches(module)
        if pattern is not None:
            found.append((adapter, pattern))
    return found


def adapter_for(module: torch.nn.Module) -> tuple[Adapter, str] | None:
    """The first kind that recognises ``module`` and the pattern that matched, if any."""
    found = adapters_for(module)
    return found[0] if found else None


# --- Example inputs -----------------------------------------------------------------------------

Example = tuple[tuple[Any, ...], dict[str, Any]]


def _randn(like: torch.Tensor, generator: torch.Generator, *shape: int) -> torch.Tensor:
    """Standard normal values of ``like``'s dtype on its device (drawn on the CPU)."""
    return torch.randn(*shape, generator=generator).to(device=like.device, dtype=like.dtype)


# --- RMSNorm ------------------------------------------------------------------------------------


def _rms_eps(module: torch.nn.Module) -> float | None:
    for attr in ("variance_epsilon", "eps"):
        value = getattr(module, attr, None)
        if isinstance(value, float):
            return value
    if isinstance(module, torch.nn.RMSNorm):
        return module.eps if module.eps is not None else torch.finfo(torch.float32).eps
    return None


def _is_rmsnorm(module: torch.nn.Module) -> bool:
    weight = getattr(module, "weight", None)
    return isinstance(weight, torch.nn.Parameter) and weight.dim() == 1 and _rms_eps(module) is not None


def _rmsnorm_forward(module: torch.nn.Module, x: torch.Tensor) -> Any:
    eps = _rms_eps(module)
    weight = module.weight
    if eps is None or weight.dtype != x.dtype:
        return NotImplemented
    return neuron.rmsnorm(x, weight, eps)


def _offset_rmsnorm_forward(module: Any, x: torch.Tensor) -> Any:
    """``x̂ · (1 + weight)`` (Gemma's RMSNorm, whose weight starts at zero): the kernel's weight is
    ``1 + weight``, computed in fp32 and rounded once to ``x``'s dtype."""
    eps = _rms_eps(module)
    weight = module.weight
    if eps is None or weight.dtype != x.dtype:
        return NotImplemented
    return neuron.rmsnorm(x, (1.0 + weight.float()).to(x.dtype), eps)


def _rmsnorm_example(module: Any, generator: torch.Generator) -> Example:
    weight = module.weight
    return (_randn(weight, generator, 2, 3, weight.shape[0]),), {}


# --- Linear -------------------------------------------------------------------------------------


def _is_linear(module: torch.nn.Module) -> bool:
    return isinstance(module, torch.nn.Linear)


def _linear_forward(module: torch.nn.Module, x: torch.Tensor) -> Any:
    weight: torch.Tensor = getattr(module, "weight")  # noqa: B009 (typed: a Linear's parameter)
    bias: torch.Tensor | None = getattr(module, "bias", None)
    if weight.dtype != x.dtype or (bias is not None and bias.dtype != x.dtype):
        return NotImplemented
    if bias is None and is_k_major(weight):
        # `x @ weightᵀ` with `weightᵀ` read as it is stored: no per-call transposes.
        return neuron.matmul(x, weight.t())
    return neuron.linear(x, weight, bias)


def is_k_major(weight: torch.Tensor) -> bool:
    """Whether a 2-D ``weight[N, K]`` is stored as its contiguous transpose ``[K, N]``."""
    return weight.dim() == 2 and not weight.is_contiguous() and weight.t().is_contiguous()


def _linear_k_major(module: torch.nn.Module) -> tuple[str, ...]:
    """A bias-free Linear reads its weight K-major through ``matmul``; with a bias it keeps
    PyTorch's layout, where ``linear`` adds the bias as each output tile leaves PSUM (rounded
    once)."""
    return ("weight",) if getattr(module, "bias", None) is None else ()


def _linear_example(module: Any, generator: torch.Generator) -> Example:
    return (_randn(module.weight, generator, 2, 3, module.in_features),), {}


# --- Gated MLP ----------------------------------------------------------------------------------


def _is_silu(fn: Any) -> bool:
    return isinstance(fn, torch.nn.SiLU) or type(fn).__name__ in ("SiLUActivation", "SiLU") or fn is F.silu


_GELU_TANH = ("GELUTanh", "PytorchGELUTanh", "GELUPytorchTanh", "NewGELUActivation", "FastGELUActivation")


def _gelu_approximation(fn: Any) -> str | None:
    """``"none"`` or ``"tanh"`` for a GELU activation (``nn.GELU``, ``F.gelu``, a partial of it,
    or an activation module wrapping one, as transformers' ``GELUTanh`` does), else ``None``."""
    if isinstance(fn, torch.nn.GELU):
        return fn.approximate
    if fn is F.gelu:
        return "none"
    if isinstance(fn, functools.partial) and fn.func is F.gelu and not fn.args:
        approximate = fn.keywords.get("approximate", "none")
        return approximate if approximate in ("none", "tanh") else None
    if type(fn).__name__ in _GELU_TANH:
        return "tanh"
    if type(fn).__name__ == "GELUActivation":
        return "none"
    return None


def _gated(module: torch.nn.Module, activation: Callable[[Any], bool]) -> bool:
    projections = [getattr(module, n, None) for n in ("gate_proj", "up_proj", "down_proj")]
    return all(isinstance(p, torch.nn.Linear) for p in projections) and activation(
        getattr(module, "act_fn", None)
    )


def _is_gated_mlp(module: torch.nn.Module) -> bool:
    return _gated(module, _is_silu)


def _is_gated_gelu_mlp(module: torch.nn.Module) -> bool:
    return _gated(module, lambda fn: _gelu_approximation(fn) is not None)


def _linear_of(proj: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    """A projection through its own (possibly swapped) forward."""
    out: torch.Tensor = proj(x)
    return out


def _mlp_forward(module: Any, x: torch.Tensor) -> Any:
    act = neuron.silu_mul(_linear_of(module.gate_proj, x), _linear_of(module.up_proj, x))
    return _linear_of(module.down_proj, act)


def _gelu_mlp_forward(module: Any, x: torch.Tensor) -> Any:
    approximate = _gelu_approximation(module.act_fn)
    if approximate is None:
        return NotImplemented
    gate, up = _linear_of(module.gate_proj, x), _linear_of(module.up_proj, x)
    return _linear_of(module.down_proj, neuron.gelu_mul(gate, up, approximate))


def _mlp_example(module: Any, generator: torch.Generator) -> Example:
    weight = module.gate_proj.weight
    return (_randn(weight, generator, 2, 3, module.gate_proj.in_features),), {}


# --- Attention ----------------------------------------------------------------------------------


def _is_attention(module: torch.nn.Module) -> bool:
    projections = [getattr(module, n, None) for n in ("q_proj", "k_proj", "v_proj", "o_proj")]
    return (
        all(isinstance(p, torch.nn.Linear) for p in projections)
        and isinstance(getattr(module, "head_dim", None), int)
        and isinstance(getattr(module, "scaling", None), float)
    )


def _rotary_table(t: torch.Tensor, seq: int) -> torch.Tensor | None:
    """``cos``/``sin`` as ``[S, Dh]``: transformers passes ``[B, S, Dh]`` with one row of
    positions per batch entry; only identical rows (no per-sequence offsets) fit the kernel."""
    if t.dim() == 2:
        table = t
    elif t.dim() == 3 and (t.shape[0] == 1 or bool((t == t[:1]).all())):
        table = t[0]
    else:
        return None
    return table.contiguous() if table.shape[0] == seq else None


def _attention_forward(
    module: Any,
    hidden_states: torch.Tensor,
    position_embeddings: tuple[torch.Tensor, torch.Tensor] | None = None,
    attention_mask: torch.Tensor | None = None,
    *args: Any,
    **kwargs: Any,
) -> Any:
    dropout = module.training and getattr(module, "attention_dropout", 0.0) != 0.0
    if args or attention_mask is not None or position_embeddings is None or dropout:
        return NotImplemented
    cache = kwargs.get("cache", kwargs.get("past_key_values"))
    *lead, _ = hidden_states.shape
    if len(lead) != 2:
        return NotImplemented
    batch, seq = lead
    dh = module.head_dim
    cos, sin = (_rotary_table(t, seq) for t in position_embeddings)
    if cos is None or sin is None or cos.dtype != hidden_states.dtype:
        return NotImplemented

    def heads(x: torch.Tensor) -> torch.Tensor:
        return x.view(batch, seq, -1, dh).transpose(1, 2).contiguous()

    q = heads(_linear_of(module.q_proj, hidden_states))
    k = heads(_linear_of(module.k_proj, hidden_states))
    v = heads(_linear_of(module.v_proj, hidden_states))
    q, k = neuron.rope(q, k, cos, sin)
    if cache is not None:
        k, v = cache.update(k, v, module.layer_idx)
        k, v = k.contiguous(), v.contiguous()
    keys = k.shape[2]
    if keys != seq and seq != 1:
        return NotImplemented  # a prefill after cached keys needs a bottom-right causal mask
    out, _ = neuron.flash_attention(q, k, v, keys == seq and seq > 1, module.scaling)
    out = out.transpose(1, 2).reshape(batch, seq, -1)
    return _linear_of(module.o_proj, out), None


def _attention_example(module: Any, generator: torch.Generator) -> Example:
    """One query position (so causal or not, every attention implementation agrees) at a
    rotary angle other than 0 (so the rotation is exercised), no mask."""
    weight = module.q_proj.weight
    hidden = _randn(weight, generator, 1, 1, module.q_proj.in_features)
    half = torch.rand(module.head_dim // 2, generator=generator) * 6.0 + 0.5
    angles = torch.cat([half, half]).reshape(1, 1, -1)
    cos, sin = (t.to(device=weight.device, dtype=weight.dtype) for t in (angles.cos(), angles.sin()))
    return (hidden, (cos, sin), None), {}


# The built-in kinds, registered as any other: the most general first, as later kinds are tried
# first (an RMSNorm is tried before an offset RMSNorm, which it looks like).
for _adapter in (
    Adapter(
        "Linear", ("linear", "matmul"), _is_linear, _linear_forward, _linear_example, k_major=_linear_k_major
    ),
    Adapter("OffsetRMSNorm", ("rmsnorm",), _is_rmsnorm, _offset_rmsnorm_forward, _rmsnorm_example),
    Adapter("RMSNorm", ("rmsnorm",), _is_rmsnorm, _rmsnorm_forward, _rmsnorm_example),
    Adapter("GELU MLP", ("gelu_mul", "linear"), _is_gated_gelu_mlp, _gelu_mlp_forward, _mlp_example, True),
    Adapter("MLP", ("silu_mul", "linear"), _is_gated_mlp, _mlp_forward, _mlp_example, True),
    Adapter(
        "Attention",
        ("flash_attention", "linear", "rope"),
        _is_attention,
        _attention_forward,
        _attention_example,
        True,
    ),
):
    register_adapter(_adapter)
