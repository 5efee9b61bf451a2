"""The built-in graph patterns of ``backend="nki"``, each registered through
:func:`torch_nki.compiler.register_pattern` like a user's (see :mod:`torch_nki.compiler`)."""

from __future__ import annotations

import operator
from typing import Any, TypeGuard

import torch
import torch.nn.functional as F
from torch import fx

from torch_nki.compiler import (
    _ADD,
    _MUL,
    Pattern,
    Rewrite,
    Rewriter,
    _accepts,
    _is,
    _is_method,
    _only_user,
    _value,
    register_pattern,
)

neuron = torch.ops.neuron


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


def _rotary_pattern(rw: Rewriter) -> None:
    """Pairs the rotary patterns sharing ``cos``/``sin`` (queries, then keys) into one
    ``neuron.rope`` each; ``cos``/``sin`` broadcast over batch and heads become ``[S, Dh]``."""
    gm = rw.gm
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
                rw.keep(q_nodes[0], "cos/sin differ across batch or heads")
                continue
            if max(order[q], order[k]) > order[first]:
                rw.keep(q_nodes[0], "q and k are not both ready")
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
                rw.keep(q_nodes[0], reason)
                for n in (qc, kc, c2, s2):
                    gm.graph.erase_node(n)
                continue
            with gm.graph.inserting_before(first):
                rope = gm.graph.call_function(neuron.rope.default, (qc, kc, c2, s2))
                outs = [gm.graph.call_function(operator.getitem, (rope, i)) for i in (0, 1)]
            for out, nodes in zip(outs, (q_nodes, k_nodes), strict=True):
                out.meta = dict(nodes[0].meta)
                nodes[0].replace_all_uses_with(out)
            rw.log += [Rewrite(rw.pattern, n[0].name, True) for n in (q_nodes, k_nodes)]


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


def _linear(rw: Rewriter) -> None:
    for node in rw.calls(F.linear, torch._C._nn.linear):
        x, w, *rest = node.args
        bias = rest[0] if rest else node.kwargs.get("bias")
        rw.attempt(node, neuron.linear.default, (x, w, bias))


def _addmm(rw: Rewriter) -> None:
    for node in rw.calls(torch.addmm):
        if node.kwargs or len(node.args) != 3:
            continue
        bias, x, w = node.args
        if isinstance(_value(bias), torch.Tensor) and _value(bias).dim() == 1:
            with rw.graph.inserting_before(node):
                weight = rw.graph.call_method("t", (w,))
            value = _value(w)
            weight.meta = {"example_value": value.t()} if isinstance(value, torch.Tensor) else {}
            if not rw.attempt(node, neuron.linear.default, (x, weight, bias)):
                rw.graph.erase_node(weight)


def _matmul(rw: Rewriter) -> None:
    for node in rw.calls(torch.matmul, torch.mm, operator.matmul):
        x, w = node.args
        value = _value(w)
        if isinstance(value, torch.Tensor) and value.dim() == 2:
            rw.attempt(node, neuron.matmul.default, (x, w))


def _activation_times(rw: Rewriter, activation: Any) -> Any:
    """The ``(product, activation, b)`` of each ``activation(a) * b`` (either order) whose
    activation value has no other user."""
    for node in rw.calls(*_MUL):
        if len(node.args) != 2:
            continue
        a, b = node.args
        if not _is(a, activation):
            a, b = b, a
        if _is(a, activation) and not a.kwargs.get("inplace", False) and _only_user(a, node):
            yield node, a, b


def _silu_mul(rw: Rewriter) -> None:
    for node, act, up in _activation_times(rw, F.silu):
        if rw.attempt(node, neuron.silu_mul.default, (act.args[0], up)):
            rw.erase_unused(act)


def _gelu_mul(rw: Rewriter) -> None:
    for node, act, up in _activation_times(rw, F.gelu):
        approximate = act.kwargs.get("approximate", act.args[1] if len(act.args) > 1 else "none")
        if rw.attempt(node, neuron.gelu_mul.default, (act.args[0], up, approximate)):
            rw.erase_unused(act)


def _rmsnorm_pattern(rw: Rewriter) -> None:
    for node in rw.calls(*_MUL):
        found = _rmsnorm(node) if len(node.args) == 2 else None
        if found is None:
            continue
        x, weight, eps, chain = found
        if all(_only_user(n, user) for n, user in zip(chain[1:], chain[:-1], strict=False)):
            rw.attempt(node, neuron.rmsnorm.default, (x, weight, eps))
            rw.erase_unused(*chain[1:])
        else:
            rw.keep(node, "an intermediate value has other users")


def _softmax(rw: Rewriter) -> None:
    for node in rw.calls(torch.softmax, F.softmax):
        x, *rest = node.args
        dim = rest[0] if rest else node.kwargs.get("dim")
        value = _value(x)
        if (
            isinstance(value, torch.Tensor)
            and dim in (-1, value.dim() - 1)
            and node.kwargs.get("dtype") is None
        ):
            rw.attempt(node, neuron.softmax.default, (x,))


def _sdpa(rw: Rewriter) -> None:
    for node in rw.calls(F.scaled_dot_product_attention):
        q, k, v = node.args[:3]
        kw = dict(node.kwargs)
        if kw.get("dropout_p", 0.0) != 0.0 or len(node.args) > 3:
            rw.keep(node, "dropout or positional options")
            continue
        mask = kw.get("attn_mask")
        if mask is not None:
            if kw.get("is_causal", False) or not _is_static_causal_mask(rw.gm, mask):
                rw.keep(node, "an attention mask that is not a static causal mask")
                continue
            kw["is_causal"] = True
        qv, kv = _value(q), _value(k)
        if isinstance(qv, torch.Tensor) and isinstance(kv, torch.Tensor):
            if qv.shape[1] != kv.shape[1] and not kw.get("enable_gqa", False):
                rw.keep(node, "heads differ without enable_gqa")
                continue
            if bool(kw.get("is_causal", False)) and qv.shape[-2] != kv.shape[-2]:
                rw.keep(node, "causal with S != Sk")
                continue
        with rw.graph.inserting_before(node):
            qc, kc, vc = (rw.graph.call_method("contiguous", (t,)) for t in (q, k, v))
        for c, src in zip((qc, kc, vc), (q, k, v), strict=True):
            c.meta = dict(src.meta) if isinstance(src, fx.Node) else {}
        args = (qc, kc, vc, bool(kw.get("is_causal", False)), kw.get("scale"))
        if not rw.attempt(node, neuron.flash_attention.default, args, take=0):
            for c in (qc, kc, vc):
                rw.graph.erase_node(c)


for _pattern in (
    Pattern("linear", ("linear",), _linear),
    Pattern("addmm", ("linear",), _addmm),
    Pattern("matmul", ("matmul",), _matmul),
    Pattern("silu(a) * b", ("silu_mul",), _silu_mul),
    Pattern("gelu(a) * b", ("gelu_mul",), _gelu_mul),
    Pattern("rmsnorm", ("rmsnorm",), _rmsnorm_pattern),
    Pattern("softmax", ("softmax",), _softmax),
    Pattern("sdpa", ("flash_attention",), _sdpa),
    Pattern("rotary", ("rope",), _rotary_pattern),
):
    register_pattern(_pattern)
