"""``torch.compile(model, backend="nki")``: rewrite the captured graph's patterns into neuron ops
wherever their contracts accept the shapes, then compile the graph with Inductor.

The backend is registered through the ``torch_dynamo_backends`` entry point. It works on the graph
Dynamo captures (torch-level calls with fake example values on every node) and rewrites:

* ``F.linear(x, w, b)`` and ``torch.addmm(b, x, w)`` (1-D bias) → ``neuron.linear``;
  ``torch.matmul`` / ``torch.mm`` / ``@`` with a 2-D right operand → ``neuron.matmul``;
* ``silu(a) * b`` → ``neuron.silu_mul``;
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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

import torch
import torch.nn.functional as F
from torch import fx

__all__ = ["Rewrite", "last_log", "nki_backend", "rewrite"]

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


def _strip_float_cast(node: Any) -> Any:
    """``x`` for ``x.to(torch.float32)`` / ``x.float()``, else the node itself."""
    if _is_method(node, "to") and len(node.args) >= 2 and node.args[1] is torch.float32:
        return node.args[0]
    if _is_method(node, "float"):
        return node.args[0]
    return node


def _rmsnorm(node: fx.Node) -> tuple[Any, Any, float, list[fx.Node]] | None:
    """Matches ``mul(weight, y)`` (either order) whose ``y`` is RMSNorm's normalised value."""
    for weight, y in (node.args, tuple(reversed(node.args))):
        chain = [node]
        if _is_method(y, "to"):
            chain.append(y)
            y = y.args[0]
        if not _is(y, *_MUL):
            continue
        chain.append(y)
        h, r = y.args
        if not _is(r, torch.rsqrt):
            h, r = r, h
        if not _is(r, torch.rsqrt) or not _is(r.args[0], *_ADD):
            continue
        add = r.args[0]
        mean, eps = add.args
        if not isinstance(eps, float) or not _is_method(mean, "mean") or not _is_method(mean.args[0], "pow"):
            continue
        power = mean.args[0]
        dims = mean.args[1:] or (mean.kwargs.get("dim"),)
        if power.args[0] is not h or power.args[1] != 2 or dims[0] not in (-1, [-1], (-1,)):
            continue
        if not mean.kwargs.get("keepdim", False):
            continue
        chain += [r, add, mean, power]
        x = _strip_float_cast(h)
        return x, weight, eps, chain
    return None


def _half_slice(node: object, t: fx.Node, first: bool, half: int) -> TypeGuard[fx.Node]:
    """``node`` is ``t[..., :half]`` (``first``) or ``t[..., half:]``."""
    if not _is(node, operator.getitem) or node.args[0] is not t:
        return False
    index = node.args[1]
    want = slice(None, half, None) if first else slice(half, None, None)
    if not (isinstance(index, tuple) and len(index) == 2):
        return False
    # torch.fx's `Argument` type omits the Ellipsis a getitem node's index holds.
    return index[0] is Ellipsis and index[1] == want  # type: ignore[comparison-overlap, unreachable]


def _rotary(node: fx.Node) -> tuple[fx.Node, Any, Any, list[fx.Node]] | None:
    """Matches ``t * cos + cat((-t[..., h:], t[..., :h]), -1) * sin`` (either operand order)
    at its ``add``; returns ``(t, cos, sin, nodes)``."""
    if not _is(node, *_ADD) or len(node.args) != 2:
        return None
    for a, b in (node.args, tuple(reversed(node.args))):
        if not (_is(a, *_MUL) and _is(b, *_MUL)):
            continue
        for t, cos in (a.args, tuple(reversed(a.args))):
            value = _value(t)
            if not isinstance(t, fx.Node) or not isinstance(value, torch.Tensor) or value.dim() != 4:
                continue
            half = int(value.shape[-1]) // 2
            for cat, sin in (b.args, tuple(reversed(b.args))):
                if not _is(cat, torch.cat):
                    continue
                parts = cat.args[0]
                dim = cat.kwargs.get("dim", cat.args[1] if len(cat.args) > 1 else 0)
                if dim not in (-1, 3) or not isinstance(parts, list | tuple) or len(parts) != 2:
                    continue
                neg, x1 = parts
                if not _is(neg, operator.neg, torch.neg):
                    continue
                x2 = neg.args[0]
                if _half_slice(x1, t, True, half) and _half_slice(x2, t, False, half):
                    return t, cos, sin, [node, a, b, cat, neg, x1, x2]
    return None


def _rewrite_rotary(gm: fx.GraphModule, log: list[Rewrite]) -> None:
    """Pairs the rotary patterns sharing ``cos``/``sin`` (queries, then keys) into one
    ``neuron.rope`` each; ``cos``/``sin`` broadcast over batch and heads become ``[S, Dh]``."""
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    groups: dict[tuple[Any, Any], list[tuple[fx.Node, list[fx.Node]]]] = {}
    for node in list(gm.graph.nodes):
        found = _rotary(node)
        if found is not None:
            t, cos, sin, nodes = found
            groups.setdefault((cos, sin), []).append((t, nodes))
    for (cos, sin), matches in groups.items():
        for (q, q_nodes), (k, k_nodes) in zip(matches[::2], matches[1::2], strict=False):
            first = min(q_nodes[0], k_nodes[0], key=order.__getitem__)
            cv = _value(cos)
            if not isinstance(cv, torch.Tensor) or any(int(d) != 1 for d in cv.shape[:-2]):
                log.append(Rewrite("rotary", q_nodes[0].name, False, "cos/sin differ across batch or heads"))
                continue
            if max(order[q], order[k]) > order[first]:
                log.append(Rewrite("rotary", q_nodes[0].name, False, "q and k are not both ready"))
                continue
            s, d = (int(x) for x in cv.shape[-2:])
            with gm.graph.inserting_before(first):
                qc, kc = (gm.graph.call_method("contiguous", (t,)) for t in (q, k))
                c2, s2 = (gm.graph.call_method("reshape", (t, s, d)) for t in (cos, sin))
            for new, src in ((qc, q), (kc, k)):
                new.meta = dict(src.meta)
            for new, src in ((c2, cos), (s2, sin)):
                value = _value(src)
                new.meta = {"example_value": value.reshape(s, d)} if isinstance(value, torch.Tensor) else {}
            reason = _accepts(neuron.rope.default, (qc, kc, c2, s2))
            if reason is not None:
                log.append(Rewrite("rotary", q_nodes[0].name, False, reason))
                for n in (qc, kc, c2, s2):
                    gm.graph.erase_node(n)
                continue
            with gm.graph.inserting_before(first):
                rope = gm.graph.call_function(neuron.rope.default, (qc, kc, c2, s2))
                outs = [gm.graph.call_function(operator.getitem, (rope, i)) for i in (0, 1)]
            for out, nodes in zip(outs, (q_nodes, k_nodes), strict=True):
                out.meta = dict(nodes[0].meta)
                nodes[0].replace_all_uses_with(out)
            log.append(Rewrite("rotary", q_nodes[0].name, True))
            log.append(Rewrite("rotary", k_nodes[0].name, True))


def _constant(gm: fx.GraphModule, node: fx.Node) -> Any:
    """The value of ``node`` when it depends on no graph input (a mask built from ``arange``),
    computed now; ``None`` otherwise."""
    order: list[fx.Node] = []
    seen: set[fx.Node] = set()

    def visit(n: fx.Node) -> bool:
        if n in seen:
            return True
        seen.add(n)
        if n.op in ("placeholder", "call_module", "output"):
            return False
        if not all(visit(i) for i in n.all_input_nodes):
            return False
        order.append(n)
        return True

    if not visit(node):
        return None
    env: dict[fx.Node, Any] = {}
    try:
        for n in order:
            args = fx.node.map_arg(n.args, env.__getitem__)
            kwargs = fx.node.map_arg(n.kwargs, env.__getitem__)
            if n.op == "call_function":
                env[n] = n.target(*args, **kwargs)  # type: ignore[operator]
            elif n.op == "call_method":
                env[n] = getattr(args[0], str(n.target))(*args[1:], **kwargs)
            else:  # get_attr
                value: Any = gm
                for part in str(n.target).split("."):
                    value = getattr(value, part)
                env[n] = value
    except Exception:
        return None
    return env[node]


def _is_static_causal_mask(gm: fx.GraphModule, mask: Any) -> bool:
    """Whether ``mask`` is computed from constants only and is exactly the top-left causal mask
    (``True``/``0`` on and below the diagonal, ``False``/``-inf`` above), for every batch entry
    and head."""
    if not isinstance(mask, fx.Node):
        return False
    with torch.no_grad():
        value = _constant(gm, mask)
    if not isinstance(value, torch.Tensor) or value.dim() < 2:
        return False
    s, sk = value.shape[-2:]
    causal = torch.ones(s, sk, dtype=torch.bool).tril()
    if value.dtype == torch.bool:
        return bool((value == causal).all())
    allowed = value == 0
    blocked = torch.isneginf(value) | (value <= torch.finfo(value.dtype).min / 2)
    return bool((allowed == causal).all() and (blocked == ~causal).all())


def rewrite(gm: fx.GraphModule) -> list[Rewrite]:
    """Rewrites ``gm`` in place (see the module doc); returns the decisions."""
    log: list[Rewrite] = []

    def attempt(pattern: str, node: fx.Node, op: Any, args: tuple[Any, ...], take: int | None = None) -> bool:
        reason = _accepts(op, args)
        if reason is not None:
            log.append(Rewrite(pattern, node.name, False, reason))
            return False
        _replace(gm, node, op, args, take)
        log.append(Rewrite(pattern, node.name, True))
        return True

    for node in list(gm.graph.nodes):
        if node.graph is not gm.graph or node.op != "call_function":
            continue
        if node.target in (F.linear, torch._C._nn.linear):
            x, w, *rest = node.args
            bias = rest[0] if rest else node.kwargs.get("bias")
            attempt("linear", node, neuron.linear.default, (x, w, bias))
        elif node.target is torch.addmm and not node.kwargs and len(node.args) == 3:
            bias, x, w = node.args
            if isinstance(_value(bias), torch.Tensor) and _value(bias).dim() == 1:
                with gm.graph.inserting_before(node):
                    weight = gm.graph.call_method("t", (w,))
                value = _value(w)
                weight.meta = {"example_value": value.t()} if isinstance(value, torch.Tensor) else {}
                if not attempt("addmm", node, neuron.linear.default, (x, weight, bias)):
                    gm.graph.erase_node(weight)
        elif node.target in (torch.matmul, torch.mm, operator.matmul):
            x, w = node.args
            value = _value(w)
            if isinstance(value, torch.Tensor) and value.dim() == 2:
                attempt("matmul", node, neuron.matmul.default, (x, w))
        elif node.target in _MUL and len(node.args) == 2:
            a, b = node.args
            if not _is(a, F.silu):
                a, b = b, a
            if _is(a, F.silu) and not a.kwargs.get("inplace", False) and _only_user(a, node):
                gate = a.args[0]
                if attempt("silu(a) * b", node, neuron.silu_mul.default, (gate, b)):
                    gm.graph.erase_node(a)
                continue
            found = _rmsnorm(node)
            if found is not None:
                x, weight, eps, chain = found
                if all(_only_user(n, user) for n, user in zip(chain[1:], chain[:-1], strict=False)):
                    attempt("rmsnorm", node, neuron.rmsnorm.default, (x, weight, eps))
                    for dead in chain[1:]:
                        if not dead.users:
                            gm.graph.erase_node(dead)
                else:
                    log.append(Rewrite("rmsnorm", node.name, False, "an intermediate value has other users"))
        elif node.target in (torch.softmax, F.softmax):
            x, *rest = node.args
            dim = rest[0] if rest else node.kwargs.get("dim")
            value = _value(x)
            if (
                isinstance(value, torch.Tensor)
                and dim in (-1, value.dim() - 1)
                and node.kwargs.get("dtype") is None
            ):
                attempt("softmax", node, neuron.softmax.default, (x,))
        elif node.target is F.scaled_dot_product_attention:
            q, k, v = node.args[:3]
            kw = dict(node.kwargs)
            if kw.get("dropout_p", 0.0) != 0.0 or len(node.args) > 3:
                log.append(Rewrite("sdpa", node.name, False, "dropout or positional options"))
                continue
            mask = kw.get("attn_mask")
            if mask is not None:
                if kw.get("is_causal", False) or not _is_static_causal_mask(gm, mask):
                    log.append(
                        Rewrite(
                            "sdpa", node.name, False, "an attention mask that is not a static causal mask"
                        )
                    )
                    continue
                kw["is_causal"] = True
            qv, kv = _value(q), _value(k)
            if isinstance(qv, torch.Tensor) and isinstance(kv, torch.Tensor):
                if qv.shape[1] != kv.shape[1] and not kw.get("enable_gqa", False):
                    log.append(Rewrite("sdpa", node.name, False, "heads differ without enable_gqa"))
                    continue
                causal = bool(kw.get("is_causal", False))
                if causal and qv.shape[-2] != kv.shape[-2]:
                    log.append(Rewrite("sdpa", node.name, False, "causal with S != Sk"))
                    continue
            with gm.graph.inserting_before(node):
                qc, kc, vc = (gm.graph.call_method("contiguous", (t,)) for t in (q, k, v))
            for c, src in zip((qc, kc, vc), (q, k, v), strict=True):
                c.meta = dict(src.meta)
            args = (qc, kc, vc, bool(kw.get("is_causal", False)), kw.get("scale"))
            if not attempt("sdpa", node, neuron.flash_attention.default, args, take=0):
                for c in (qc, kc, vc):
                    gm.graph.erase_node(c)
    _rewrite_rotary(gm, log)
    gm.graph.eliminate_dead_code()
    gm.graph.lint()
    gm.recompile()
    return log


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
