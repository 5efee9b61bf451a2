"""Row softmax in NKI Python: ``out[i, :] = softmax(x[i, :])`` over the last dimension, max
subtracted, with the row sum fused into the exponential (``nisa.activation_reduce``).
Rows are tiled by 128 partitions; each row must fit in one tile's free dimension."""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def softmax_rows(x):
    N, D = x.shape
    out = nl.ndarray((N, D), dtype=x.dtype, buffer=nl.shared_hbm)
    P = nl.tile_size.pmax
    for i in nl.affine_range((N + P - 1) // P):
        rows = min(P, N - i * P)
        t = nl.load(x[i * P : i * P + rows, :])
        neg_max = nl.ndarray((rows, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(
            dst=neg_max, op=nl.maximum, data=t, axis=1, negate=True, keepdims=True
        )
        e = nl.ndarray((rows, D), dtype=nl.float32, buffer=nl.sbuf)
        total = nl.ndarray((rows, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation_reduce(
            dst=e, op=nl.exp, data=t, bias=neg_max, reduce_op=nl.add, reduce_res=total
        )
        inv = nl.ndarray((rows, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=inv, op=nl.reciprocal, data=total)
        y = nl.ndarray((rows, D), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=y, data=e, op0=nl.multiply, operand0=inv)
        nl.store(out[i * P : i * P + rows, :], value=y)
    return out
