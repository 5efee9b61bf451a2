"""A tiled matrix multiplication in NKI Python, in the style of the nki-samples matmul tutorial:
``result[M, N] = lhsT[K, M].T @ rhs[K, N]``, any sizes (ragged edges handled with ``min``).

It is written for the ``nki`` package (NKI 0.6) and runs unchanged on torch-nki's simulator:

    from torch_nki import nki
    with nki.as_nki():
        import matmul
    nki.simulate(matmul.matmul_tiled)(lhsT, rhs)
"""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def matmul_tiled(lhsT, rhs):
    K, M = lhsT.shape
    K2, N = rhs.shape
    assert K == K2, "lhsT and rhs must have the same contraction size"
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)

    TILE_M = nl.tile_size.gemm_stationary_fmax  # 128
    TILE_K = nl.tile_size.pmax  # 128
    TILE_N = nl.tile_size.gemm_moving_fmax  # 512

    for m in nl.affine_range((M + TILE_M - 1) // TILE_M):
        m0, mt = m * TILE_M, min(TILE_M, M - m * TILE_M)
        for n in nl.affine_range((N + TILE_N - 1) // TILE_N):
            n0, nt = n * TILE_N, min(TILE_N, N - n * TILE_N)
            acc = nl.ndarray((mt, nt), dtype=nl.float32, buffer=nl.psum)
            for k in nl.sequential_range((K + TILE_K - 1) // TILE_K):
                k0, kt = k * TILE_K, min(TILE_K, K - k * TILE_K)
                lhsT_tile = nl.load(lhsT[nl.ds(k0, kt), nl.ds(m0, mt)])
                rhs_tile = nl.load(rhs[nl.ds(k0, kt), nl.ds(n0, nt)])
                # The first matmul into `acc` overwrites it, the next ones accumulate.
                nisa.nc_matmul(dst=acc, stationary=lhsT_tile, moving=rhs_tile)
            out_tile = nl.ndarray((mt, nt), dtype=result.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=out_tile, src=acc)
            nl.store(result[nl.ds(m0, mt), nl.ds(n0, nt)], value=out_tile)
    return result
