"""``gelu(x + bias)`` with the tanh approximation, in NKI Python: the bias row is broadcast
across partitions straight from HBM (``nl.broadcast_to``), and columns are processed in chunks
with ``nl.static_range``."""

import nki
import nki.isa as nisa
import nki.language as nl

CHUNK = 512


@nki.jit
def bias_gelu(x, bias):
    N, D = x.shape
    out = nl.ndarray((N, D), dtype=x.dtype, buffer=nl.shared_hbm)
    P = nl.tile_size.pmax
    for i in nl.affine_range((N + P - 1) // P):
        rows = min(P, N - i * P)
        for c in nl.static_range((D + CHUNK - 1) // CHUNK):
            cols = min(CHUNK, D - c * CHUNK)
            t = nl.load(x[nl.ds(i * P, rows), nl.ds(c * CHUNK, cols)])
            b = nl.load(nl.broadcast_to(bias[nl.ds(c * CHUNK, cols)], (rows, cols)))
            nisa.tensor_tensor(dst=t, data1=t, data2=b, op=nl.add)
            nisa.activation(dst=t, op=nl.gelu_apprx_tanh, data=t)
            nl.store(out[nl.ds(i * P, rows), nl.ds(c * CHUNK, cols)], value=t)
    return out
