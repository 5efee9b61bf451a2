//! Matrix multiplication and `F.linear` on the tensor engine, and their backward kernels.

use crate::tiling::fill_zeros;
use nki_core::prelude::*;

/// Rows of the output block: four stationary tiles of 128.
const BLOCK_M: usize = GEMM_STATIONARY_FMAX * 4;

/// Columns of the output block: two fp32 PSUM banks of 512, so a block's 4 × 2 accumulators use
/// all eight banks.
const BLOCK_N: usize = GEMM_MOVING_FMAX * 2;

/// How a GEMM operand is stored in HBM, relative to the product `out = op(a) · op(b)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layout {
    /// `a` stored `[M, K]`, `b` stored `[K, N]`.
    AsIs,
    /// `a` stored `[K, M]` (`op(a) = aᵀ`), `b` stored `[N, K]` (`op(b) = bᵀ`).
    Transposed,
}

/// `(offset, size)` of each `tile`-sized piece of a `total`-long block (the last may be ragged).
fn pieces(total: usize, tile: usize) -> Vec<(usize, usize)> {
    (0..total)
        .step_by(tile)
        .map(|o| (o, tile.min(total - o)))
        .collect()
}

/// The width of the units in which the cores of a launch share a GEMM's rows or columns.
///
/// Whole 128-wide tiles left the last core the ragged remainder: 200 columns on two cores were
/// 128 and 72, so one core (and the simulator's thread running it) did 64% of the work. In
/// 32-wide units they are 96 and 104. No core gets more 128-wide tiles than with whole-tile
/// units (checked for every size up to 6000 on two and four cores), so a core's count of
/// tensor-engine instructions, which sets its time on the device, does not grow.
const CORE_SPLIT_UNIT: usize = 32;

/// SBUF bytes per partition the on-chip transposed copy of one block of an operand may take
/// (`K / 128` tiles of `[128, block]`); larger K reads it through transposed DMA instead.
const TRANSPOSED_BLOCK_BUDGET: usize = 64 * 1024;

/// SBUF bytes per partition a held `bᵀ` block may take when `aᵀ` blocks are transposed on chip
/// as well (two to four 1024-column blocks, so each `aᵀ` block serves several).
const HELD_COLUMNS_BUDGET: usize = 128 * 1024;

/// `out[M, N] = op(a)[M, K] · op(b)[K, N]`, accumulated over K in fp32 PSUM.
///
/// The output is taken in blocks of up to 512 × 1024: four 128-row stationary tiles by two
/// 512-column moving tiles, eight accumulators filling the eight PSUM banks. Operands stored
/// the "wrong way" for the tensor engine (`a` as `[M, K]`, whose stationary tiles are `aᵀ`; `b`
/// as `[N, K]`, whose moving tiles are `bᵀ`) are transposed on chip when a block's transposed
/// copy fits [`TRANSPOSED_BLOCK_BUDGET`]: loaded with plain row DMAs and transposed on the tensor
/// engine (`nc_transpose` through PSUM) once per block, then reused by every block on the other
/// side. The cores of the launch split the output by rows or by columns ([`splits_rows`]), in
/// [`CORE_SPLIT_UNIT`]-wide units ([`program_range`]). Held `bᵀ` column blocks make the column blocks the outer loop; when `aᵀ` is transposed
/// on chip too, a held `bᵀ` block spans up to four output blocks ([`HELD_COLUMNS_BUDGET`]), so
/// each `aᵀ` block is transposed once per held block rather than once per output block.
/// Otherwise each K step loads its tiles, through a transposed DMA access pattern where needed.
/// Each K step issues eight matmuls on the block's loaded tiles. Ragged edges on all three
/// dimensions; results leave PSUM through the scalar engine with a cast to `out`'s dtype (the
/// vector engine adds the bias when there is one) and are stored. Transposes are exact, so the
/// result does not depend on the path.
///
/// With `bias` (`[N]`), each output tile gets the bias row added (broadcast across partitions
/// straight from HBM) on its way out of PSUM, in fp32.
fn gemm(
    out: &HbmView,
    a: &HbmView,
    a_layout: Layout,
    b: &HbmView,
    b_layout: Layout,
    bias: Option<&HbmView>,
) {
    let (m, n) = (out.shape()[0], out.shape()[1]);
    let k = match a_layout {
        Layout::AsIs => a.shape()[1],
        Layout::Transposed => a.shape()[0],
    };
    let dt = a.dtype();
    let k_tiles = pieces(k, PMAX);
    let fits = |block: usize| k_tiles.len() * block * dt.size_bytes() <= TRANSPOSED_BLOCK_BUDGET;
    let a_on_chip = a_layout == Layout::AsIs && fits(BLOCK_M);
    let b_on_chip = b_layout == Layout::Transposed && fits(BLOCK_N);
    // `op(x)ᵀ` of rows `start + offsets` of `x` stored `[rows, K]`: per K tile, per piece, a
    // `[kn, piece]` SBUF tile transposed on chip.
    let transposed_block =
        |x: &HbmView, start: &AffineExpr, parts: &[(usize, usize)]| -> Vec<Vec<Tile>> {
            k_tiles
                .iter()
                .map(|&(k0, kn)| {
                    parts
                        .iter()
                        .map(|&(p0, size)| {
                            let held = sbuf([kn, size], dt);
                            for (q0, q) in pieces(size, PMAX) {
                                let natural = sbuf([q, kn], dt);
                                dma_copy(
                                    &natural,
                                    x.clone().rows(start.clone() + (p0 + q0), q).cols(k0, kn),
                                );
                                let t = psum([kn, q], dt);
                                nc_transpose(&t, &natural);
                                tensor_copy(held.cols(q0, q), &t);
                            }
                            held
                        })
                        .collect()
                })
                .collect()
        };
    // One output block: rows `mb` by columns `nb`, with the held transposed tiles if any.
    let output_block = |mb: &TileSpan,
                        nb: &TileSpan,
                        st_held: Option<&Vec<Vec<Tile>>>,
                        mv_held: Option<&Vec<Vec<Tile>>>| {
        let row_tiles = pieces(mb.size, GEMM_STATIONARY_FMAX);
        let col_tiles = pieces(nb.size, GEMM_MOVING_FMAX);
        let accs: Vec<Vec<Tile>> = row_tiles
            .iter()
            .map(|&(_, rows)| {
                col_tiles
                    .iter()
                    .map(|&(_, cols)| psum([rows, cols], DType::F32))
                    .collect()
            })
            .collect();
        // Unrolled K steps (held tiles) start each accumulator with an overwriting matmul; a K
        // loop accumulates into zeroed banks.
        let unrolled = st_held.is_some() || mv_held.is_some();
        if !unrolled {
            for acc in accs.iter().flatten() {
                memset(acc, 0.0);
            }
        }
        // Result tile (r, c) out of PSUM (with the bias, if any) and to `out`.
        let evacuate = |r: usize, c: usize| {
            let (acc, (r0, rows), (c0, cols)) = (&accs[r][c], row_tiles[r], col_tiles[c]);
            let res = sbuf([rows, cols], out.dtype());
            match bias {
                Some(bias) => {
                    let bt = sbuf([rows, cols], bias.dtype());
                    dma_copy(
                        &bt,
                        bias.clone()
                            .reshape(&[1, n])
                            .cols(nb.start.clone() + c0, cols)
                            .broadcast_to(&[rows, cols]),
                    );
                    tensor_tensor(&res, acc, &bt, BinOp::Add);
                }
                // On the scalar engine, which a GEMM leaves idle: the vector engine's
                // copies of the next block's transposed tiles then never queue behind
                // this block's evacuation.
                None => activation(&res, ActFn::Identity, acc, None, 1.0),
            }
            dma_copy(
                out.clone()
                    .rows(mb.start.clone() + r0, rows)
                    .cols(nb.start.clone() + c0, cols),
                &res,
            );
        };
        let step = |kt: &TileSpan, ki: Option<usize>| {
            let loaded_st: Vec<Tile>;
            let st: &[Tile] = match (st_held, ki) {
                (Some(tiles), Some(ki)) => &tiles[ki],
                _ => {
                    loaded_st = row_tiles
                        .iter()
                        .map(|&(r0, rows)| {
                            let t = sbuf([kt.size, rows], dt);
                            let src = match a_layout {
                                Layout::AsIs => a
                                    .clone()
                                    .rows(mb.start.clone() + r0, rows)
                                    .cols(kt.start.clone(), kt.size)
                                    .t(),
                                Layout::Transposed => a
                                    .clone()
                                    .rows(kt.start.clone(), kt.size)
                                    .cols(mb.start.clone() + r0, rows),
                            };
                            dma_copy(&t, src);
                            t
                        })
                        .collect();
                    &loaded_st
                }
            };
            let loaded_mv: Vec<Tile>;
            let moving: &[Tile] = match (mv_held, ki) {
                (Some(tiles), Some(ki)) => &tiles[ki],
                _ => {
                    loaded_mv = col_tiles
                        .iter()
                        .map(|&(c0, cols)| {
                            let t = sbuf([kt.size, cols], dt);
                            let src = match b_layout {
                                Layout::AsIs => b
                                    .clone()
                                    .rows(kt.start.clone(), kt.size)
                                    .cols(nb.start.clone() + c0, cols),
                                Layout::Transposed => b
                                    .clone()
                                    .rows(nb.start.clone() + c0, cols)
                                    .cols(kt.start.clone(), kt.size)
                                    .t(),
                            };
                            dma_copy(&t, src);
                            t
                        })
                        .collect();
                    &loaded_mv
                }
            };
            for (row_accs, s) in accs.iter().zip(st) {
                for (acc, mv) in row_accs.iter().zip(moving) {
                    nc_matmul(acc, s, mv, ki.is_none_or(|i| i > 0));
                }
            }
        };
        if let (Some(st), Some(mv)) = (st_held, mv_held) {
            // Both operands held: each accumulator's whole K chain, then its evacuation, before
            // the next accumulator. The simulator then finds the accumulator (256 KiB for a
            // 128 × 512 fp32 bank) in cache from one matmul of the chain to the next and for its
            // evacuation, rather than cycling through up to eight banks (2 MiB) once per K step;
            // on the device, background LoadStationary hides the stationary changing from one
            // matmul to the next, and each bank's evacuation overlaps the next bank's chain.
            for (r, row_accs) in accs.iter().enumerate() {
                for (c, acc) in row_accs.iter().enumerate() {
                    for ki in 0..k_tiles.len() {
                        nc_matmul(acc, &st[ki][r], &mv[ki][c], ki > 0);
                    }
                    evacuate(r, c);
                }
            }
            return;
        }
        if unrolled {
            // Held tiles are indexed by K tile, so the K steps are unrolled.
            for (ki, &(k0, kn)) in k_tiles.iter().enumerate() {
                step(
                    &TileSpan {
                        start: k0.into(),
                        size: kn,
                    },
                    Some(ki),
                );
            }
        } else {
            for_each_tile(k, PMAX, |kt| step(&kt, None));
        }
        for (r, row_accs) in accs.iter().enumerate() {
            for c in 0..row_accs.len() {
                evacuate(r, c);
            }
        }
    };
    let stationary = |mb: &TileSpan| {
        a_on_chip.then(|| transposed_block(a, &mb.start, &pieces(mb.size, GEMM_STATIONARY_FMAX)))
    };
    // This program's rows and columns of the output: the cores split one of the two
    // dimensions ([`splits_rows`]) in [`CORE_SPLIT_UNIT`]-wide units, so the shares differ by
    // at most one unit; a program whose share is empty has nothing to load or transpose.
    let (rows, cols) = if splits_rows(m, n, a_on_chip, b_on_chip) {
        (program_range(m, CORE_SPLIT_UNIT), 0..n)
    } else {
        (0..m, program_range(n, CORE_SPLIT_UNIT))
    };
    if rows.is_empty() || cols.is_empty() {
        return;
    }
    if b_on_chip {
        // With `aᵀ` transposed on chip too, a wider held `bᵀ` block amortises each row block's
        // transposes over more output blocks: as many 1024-column blocks as fit
        // [`HELD_COLUMNS_BUDGET`].
        let held_n = if a_on_chip {
            (1..=4)
                .rev()
                .map(|w| w * BLOCK_N)
                .find(|&w| k_tiles.len() * w * dt.size_bytes() <= HELD_COLUMNS_BUDGET)
                .unwrap_or(BLOCK_N)
        } else {
            BLOCK_N
        };
        let per_block = BLOCK_N / GEMM_MOVING_FMAX;
        for_each_tile_in(cols, held_n, |hb| {
            let mv = transposed_block(b, &hb.start, &pieces(hb.size, GEMM_MOVING_FMAX));
            for_each_tile_in(rows.clone(), BLOCK_M, |mb| {
                let st = stationary(&mb);
                for (j, (c0, cols)) in pieces(hb.size, BLOCK_N).into_iter().enumerate() {
                    let nb = TileSpan {
                        start: hb.start.clone() + c0,
                        size: cols,
                    };
                    let block: Vec<Vec<Tile>> = mv
                        .iter()
                        .map(|k_row| {
                            k_row
                                .iter()
                                .skip(j * per_block)
                                .take(per_block)
                                .cloned()
                                .collect()
                        })
                        .collect();
                    output_block(&mb, &nb, st.as_ref(), Some(&block));
                }
            });
        });
    } else {
        for_each_tile_in(rows, BLOCK_M, |mb| {
            let st = stationary(&mb);
            for_each_tile_in(cols.clone(), BLOCK_N, |nb| {
                output_block(&mb, &nb, st.as_ref(), None)
            });
        });
    }
}

/// Whether the cores of the launch split a GEMM's `m × n` output by rows (else by columns):
/// [`split_rows_on`] for this launch's cores.
fn splits_rows(m: usize, n: usize, a_on_chip: bool, b_on_chip: bool) -> bool {
    split_rows_on(num_programs(&[0]), m, n, a_on_chip, b_on_chip)
}

/// Whether `programs` cores split a GEMM's `m × n` output by rows (else by columns).
///
/// With `bᵀ` held on chip, every core repeats the preparation of the operand on the side it
/// does not split (its loads, and its transposes when it is transposed on chip, which cost
/// about as much again): split by rows, each core prepares only its rows of `a` and all of
/// `b`; by columns, the reverse. The rows are split when there is a [`CORE_SPLIT_UNIT`] of
/// rows for every core and `b` is the cheaper one to repeat, or when the columns are one unit.
///
/// Otherwise every output block loads its own operands, so what matters is that each core's
/// share stays whole 512 × 1024 blocks: the rows are split when there is a 512-row block for
/// every core (or the columns are too few to share), the columns otherwise. One exception:
/// when `aᵀ` is transposed on chip and all the rows are one block, a split by columns has
/// every core load and transpose all of `a` (and load its share of `b`), a split by rows its
/// share of `a` (and all of `b`), so the rows are split when `b` is the cheaper one to repeat
/// (`n < 2m`) and there is a [`CORE_SPLIT_UNIT`] of rows for every core.
fn split_rows_on(programs: usize, m: usize, n: usize, a_on_chip: bool, b_on_chip: bool) -> bool {
    let a_unit_of_rows_each = m.div_ceil(CORE_SPLIT_UNIT) >= programs;
    if b_on_chip {
        let weight = |on_chip: bool| if on_chip { 2 } else { 1 };
        let one_unit_of_columns = n.div_ceil(CORE_SPLIT_UNIT) < programs;
        a_unit_of_rows_each
            && (n * weight(b_on_chip) < m * weight(a_on_chip) || one_unit_of_columns)
    } else {
        let narrow = n.div_ceil(PMAX) < programs;
        let one_block_of_a = a_on_chip && m <= BLOCK_M && a_unit_of_rows_each;
        m.div_ceil(BLOCK_M) >= programs
            || (narrow && m.div_ceil(PMAX) >= programs)
            || (one_block_of_a && n < 2 * m)
    }
}

/// Matrix product `x @ w` of `x[..B, K]` (any leading dims, flattened into rows) and `w[K, N]`,
/// as `torch.matmul` with a 2-D right operand.
///
/// Output blocks of 512 × 1024 (eight fp32 PSUM banks), K tiled by 128 with ragged edges on all
/// three dimensions; each K step loads four transposed `x` tiles and two `w` tiles once for
/// eight matmuls.
#[kernel(
    shape(x = [..B, K], w = [K, N]) -> [..B, N],
    dtype(x in {f32, bf16, f16}, w = x) -> x,
    require(K >= 1),
    backward(matmul_backward, saves(x, w)),
    replaces("aten::mm", "aten::matmul"),
    reference("x @ w"),
    sample(x = [130, 200], w = [200, 530]),
    sample(x = [2, 65, 96], w = [96, 70]),
    sample(x = [1, 5], w = [5, 3]),
    sample(x = [20, 150], w = [150, 4700], dtypes = {f32}),
    tolerance(matmul),
    autocast(lower),
    bench(x = [4096, 4096], w = [4096, 4096]),
)]
pub fn matmul(x: &Hbm, w: &Hbm) -> Hbm {
    let (k, n) = (w.dim(0), w.dim(1));
    let rows = x.numel() / k.max(1);
    let mut shape = x.shape()[..x.shape().len() - 1].to_vec();
    shape.push(n);
    let out = shared_hbm(&shape, x.dtype());
    gemm(
        &out.reshape(&[rows, n]),
        &x.reshape(&[rows, k]),
        Layout::AsIs,
        &w.view(),
        Layout::AsIs,
        None,
    );
    out
}

/// Gradients of `matmul`: `grad_x = grad_out @ wᵀ` and `grad_w = xᵀ @ grad_out` over the
/// flattened rows, two tiled GEMMs with the transposed operands transposed on chip.
#[kernel(
    shape(grad_out = [..B, N], x = [..B, K], w = [K, N]) -> (grad_x = [..B, K], grad_w = [K, N]),
    dtype(grad_out in {f32, bf16, f16}, x = grad_out, w = grad_out) -> (grad_out, grad_out),
    require(N >= 1),
    tolerance(matmul),
)]
pub fn matmul_backward(grad_out: &Hbm, x: &Hbm, w: &Hbm) -> (Hbm, Hbm) {
    let (k, n) = (w.dim(0), w.dim(1));
    let rows = x.numel() / k.max(1);
    let grad_x = shared_hbm(x.shape(), x.dtype());
    let grad_w = shared_hbm(w.shape(), w.dtype());
    let (g, xv) = (grad_out.reshape(&[rows, n]), x.reshape(&[rows, k]));
    product_gradients(
        &g,
        &xv,
        &w.view(),
        &grad_x.reshape(&[rows, k]),
        &grad_w.view(),
    );
    (grad_x, grad_w)
}

/// `grad_a = g @ bᵀ` and `grad_b = aᵀ @ g` for the product `g`'s forward `a @ b`.
fn product_gradients(g: &HbmView, a: &HbmView, b: &HbmView, grad_a: &HbmView, grad_b: &HbmView) {
    gemm(grad_a, g, Layout::AsIs, b, Layout::Transposed, None);
    gemm(grad_b, a, Layout::Transposed, g, Layout::AsIs, None);
}

/// Batched matrix product `x[b] @ y[b]` of `x[B, M, K]` and `y[B, K, N]`, as `torch.bmm`: one
/// tiled GEMM (as `matmul`) per batch entry, the batch an independent loop.
#[kernel(
    shape(x = [B, M, K], y = [B, K, N]) -> [B, M, N],
    dtype(x in {f32, bf16, f16}, y = x) -> x,
    require(K >= 1),
    backward(bmm_backward, saves(x, y)),
    replaces("aten::bmm"),
    reference("torch.bmm(x, y)"),
    sample(x = [3, 130, 70], y = [3, 70, 200]),
    sample(x = [2, 5, 300], y = [2, 300, 7]),
    sample(x = [1, 1, 1], y = [1, 1, 1]),
    tolerance(matmul),
    autocast(lower),
    bench(x = [16, 1024, 1024], y = [16, 1024, 1024]),
)]
pub fn bmm(x: &Hbm, y: &Hbm) -> Hbm {
    let (b, m, k, n) = (x.dim(0), x.dim(1), x.dim(2), y.dim(2));
    let out = shared_hbm(&[b, m, n], x.dtype());
    affine_range(b, |i| {
        let entry = |t: &Hbm, rows: usize, cols: usize| {
            t.view().slice(0, i.clone(), 1).reshape(&[rows, cols])
        };
        gemm(
            &entry(&out, m, n),
            &entry(x, m, k),
            Layout::AsIs,
            &entry(y, k, n),
            Layout::AsIs,
            None,
        );
    });
    out
}

/// Gradients of `bmm`, per batch entry as `matmul_backward`: `grad_x = grad_out @ yᵀ` and
/// `grad_y = xᵀ @ grad_out`.
#[kernel(
    shape(grad_out = [B, M, N], x = [B, M, K], y = [B, K, N]) -> (grad_x = [B, M, K], grad_y = [B, K, N]),
    dtype(grad_out in {f32, bf16, f16}, x = grad_out, y = grad_out) -> (grad_out, grad_out),
    require(N >= 1),
    tolerance(matmul),
)]
pub fn bmm_backward(grad_out: &Hbm, x: &Hbm, y: &Hbm) -> (Hbm, Hbm) {
    let (b, m, k, n) = (x.dim(0), x.dim(1), x.dim(2), y.dim(2));
    let grad_x = shared_hbm(x.shape(), x.dtype());
    let grad_y = shared_hbm(y.shape(), y.dtype());
    affine_range(b, |i| {
        let entry = |t: &Hbm, rows: usize, cols: usize| {
            t.view().slice(0, i.clone(), 1).reshape(&[rows, cols])
        };
        product_gradients(
            &entry(grad_out, m, n),
            &entry(x, m, k),
            &entry(y, k, n),
            &entry(&grad_x, m, k),
            &entry(&grad_y, k, n),
        );
    });
    (grad_x, grad_y)
}

/// `out[n] = Σ_rows g[row, n]` of a `[M, N]` view, on the tensor engine: a ones column as the
/// stationary operand sums each 128-row tile into fp32 PSUM banks (512 columns each),
/// accumulated over the row tiles; eight banks (4096 columns) at a time.
fn column_sums(out: &HbmView, g: &HbmView) {
    let (m, n) = (g.shape()[0], g.shape()[1]);
    let dt = g.dtype();
    let ones = sbuf([m.min(PMAX), 1], dt);
    memset(&ones, 1.0);
    for_each_program_tile(n, PSUM_BANK_FMAX * PSUM_BANKS, |blk| {
        let banks: Vec<(usize, usize)> = pieces(blk.size, PSUM_BANK_FMAX);
        let accs: Vec<Tile> = banks
            .iter()
            .map(|&(_, width)| psum([1, width], DType::F32))
            .collect();
        for acc in &accs {
            memset(acc, 0.0);
        }
        for_each_tile(m, PMAX, |rows| {
            let t = sbuf([rows.size, blk.size], dt);
            dma_copy(
                &t,
                g.clone()
                    .rows(rows.start.clone(), rows.size)
                    .cols(blk.start.clone(), blk.size),
            );
            for (acc, &(c0, width)) in accs.iter().zip(&banks) {
                nc_matmul(acc, ones.rows(rows.size), t.cols(c0, width), true);
            }
        });
        for (acc, &(c0, width)) in accs.iter().zip(&banks) {
            let res = sbuf([1, width], out.dtype());
            tensor_copy(&res, acc);
            dma_copy(
                out.clone()
                    .reshape(&[1, n])
                    .cols(blk.start.clone() + c0, width),
                &res,
            );
        }
    });
}

/// `F.linear`: `x @ weightᵀ + bias` for `x[..B, K]`, `weight[N, K]` (PyTorch's layout) and an
/// optional `bias[N]`.
///
/// The leading dims of `x` are flattened into rows; the same tiled GEMM as `matmul` transposes
/// both operands on chip (`weightᵀ` in blocks of up to 4096 columns held while every row block
/// of `x` passes by, each `xᵀ` row block serving all of them), and the bias is added to each
/// output tile as it leaves PSUM (fp32), so the result is rounded once.
#[kernel(
    shape(x = [..B, K], weight = [N, K], bias = [N]) -> [..B, N],
    dtype(x in {f32, bf16, f16}, weight = x, bias = x) -> x,
    require(K >= 1),
    backward(linear_backward, saves(x, weight)),
    shard(additive(bias)),
    replaces("torch.nn.Linear", "aten::linear", "aten::addmm"),
    reference("F.linear(x, weight, bias)"),
    sample(x = [130, 200], weight = [530, 200], bias = [530]),
    sample(x = [2, 33, 150], weight = [70, 150], bias = None),
    sample(x = [1, 5], weight = [3, 5], bias = [3]),
    sample(x = [20, 150], weight = [700, 150], bias = [700], dtypes = {f32}),
    tolerance(matmul),
    autocast(lower),
    bench(x = [4096, 4096], weight = [4096, 4096], bias = None),
)]
pub fn linear(x: &Hbm, weight: &Hbm, bias: Option<&Hbm>) -> Hbm {
    let (k, n) = (weight.dim(1), weight.dim(0));
    let rows = x.numel() / k.max(1);
    let mut shape = x.shape()[..x.shape().len() - 1].to_vec();
    shape.push(n);
    let out = shared_hbm(&shape, x.dtype());
    let bias_view = bias.map(Hbm::view);
    gemm(
        &out.reshape(&[rows, n]),
        &x.reshape(&[rows, k]),
        Layout::AsIs,
        &weight.view(),
        Layout::Transposed,
        bias_view.as_ref(),
    );
    out
}

/// Gradients of `linear`: `grad_x = grad_out @ weight`, `grad_weight = grad_outᵀ @ x` (tiled
/// GEMMs over the flattened rows) and `grad_bias = Σ_rows grad_out` (the tensor engine with a
/// ones column), computed whether or not the forward had a bias (it is not used then).
#[kernel(
    shape(grad_out = [..B, N], x = [..B, K], weight = [N, K])
        -> (grad_x = [..B, K], grad_weight = [N, K], grad_bias = [N]),
    dtype(grad_out in {f32, bf16, f16}, x = grad_out, weight = grad_out)
        -> (grad_out, grad_out, grad_out),
    require(N >= 1),
    shard(reads(grad_bias: grad_out)),
    tolerance(matmul),
)]
pub fn linear_backward(grad_out: &Hbm, x: &Hbm, weight: &Hbm) -> (Hbm, Hbm, Hbm) {
    let (n, k) = (weight.dim(0), weight.dim(1));
    let rows = x.numel() / k.max(1);
    let dt = x.dtype();
    let grad_x = shared_hbm(x.shape(), dt);
    let grad_weight = shared_hbm(weight.shape(), dt);
    let grad_bias = shared_hbm(&[n], dt);
    let g = grad_out.reshape(&[rows, n]);
    let xv = x.reshape(&[rows, k]);
    let w = weight.view();
    gemm(
        &grad_x.reshape(&[rows, k]),
        &g,
        Layout::AsIs,
        &w,
        Layout::AsIs,
        None,
    );
    gemm(
        &grad_weight.view(),
        &g,
        Layout::Transposed,
        &xv,
        Layout::AsIs,
        None,
    );
    if rows == 0 {
        // An empty batch: the bias gradient is a sum over no rows.
        fill_zeros(&grad_bias);
    } else {
        column_sums(&grad_bias.view(), &g);
    }
    (grad_x, grad_weight, grad_bias)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nki_core::testing::*;

    /// `op(a) · op(b)` in f64, with row-major `a` (`[m, k]` or `[k, m]`) and `b`.
    fn naive(a: &[f32], at: bool, b: &[f32], bt: bool, m: usize, k: usize, n: usize) -> Vec<f64> {
        let ai = |i: usize, l: usize| if at { a[l * m + i] } else { a[i * k + l] } as f64;
        let bi = |l: usize, j: usize| if bt { b[j * k + l] } else { b[l * n + j] } as f64;
        let mut out = vec![0f64; m * n];
        for i in 0..m {
            for l in 0..k {
                for j in 0..n {
                    out[i * n + j] += ai(i, l) * bi(l, j);
                }
            }
        }
        out
    }

    fn arr(shape: &[usize], dtype: DType, seed: usize) -> HostArray {
        let n: usize = shape.iter().product();
        HostArray::new(
            shape,
            dtype,
            (0..n).map(|i| (((i + seed) * 7919) % 997) as f32 / 498.0 - 1.0),
        )
    }

    fn close(got: &[f32], want: &[f64], tol: f64, what: &str) {
        assert_eq!(got.len(), want.len());
        for (a, b) in got.iter().zip(want) {
            assert!(
                (*a as f64 - b).abs() <= tol * (1.0 + b.abs()),
                "{what}: {a} vs {b}"
            );
        }
    }

    fn check(m: usize, k: usize, n: usize, dtype: DType, tol: f64) {
        let (x, w) = (arr(&[m, k], dtype, 0), arr(&[k, n], dtype, 5));
        let y = run_kernel(&MATMUL_KERNEL, &[x.clone(), w.clone()], &[], Target::Trn2).unwrap();
        assert_eq!(y[0].shape, vec![m, n]);
        close(
            &y[0].values,
            &naive(&x.values, false, &w.values, false, m, k, n),
            tol,
            "y",
        );
    }

    #[test]
    fn finer_core_shares_never_give_a_core_more_whole_tiles() {
        // Each core's 128-wide tiles over its share, at most: in `CORE_SPLIT_UNIT`-wide units
        // and in whole tiles (as `program_range` shares them on core `k` of `cores`).
        let most_tiles = |total: usize, unit: usize, cores: usize| {
            (0..cores)
                .map(|k| range_share_of(total, unit, k, cores).len().div_ceil(PMAX))
                .max()
                .unwrap()
        };
        for cores in [2, 4] {
            for total in 1..=6000 {
                assert!(
                    most_tiles(total, CORE_SPLIT_UNIT, cores) <= most_tiles(total, PMAX, cores),
                    "{total} on {cores} cores"
                );
            }
        }
        // And the shares are near-even: 200 columns on two cores are 96 and 104.
        assert_eq!(range_share_of(200, CORE_SPLIT_UNIT, 0, 2), 0..96);
        assert_eq!(range_share_of(200, CORE_SPLIT_UNIT, 1, 2), 96..200);
    }

    #[test]
    fn held_operands_split_the_side_a_core_prepares_less_of() {
        // Elements of `a` and `b` per unit of K the busiest of two cores prepares when one
        // block of each is held: loaded, and transposed on chip (a second pass) where marked.
        let share = |total: usize| {
            (0..2)
                .map(|k| range_share_of(total, CORE_SPLIT_UNIT, k, 2).len())
                .max()
                .unwrap()
        };
        let passes = |on_chip: bool| if on_chip { 2 } else { 1 };
        for (a_on_chip, b_on_chip) in [(true, false), (true, true), (false, true)] {
            let (wa, wb) = (passes(a_on_chip), passes(b_on_chip));
            let prepared = |m: usize, n: usize, rows: bool| match rows {
                true => wa * share(m) + wb * n,
                false => wa * m + wb * share(n),
            };
            for m in (CORE_SPLIT_UNIT + 1..=BLOCK_M).step_by(7) {
                for n in (1..=BLOCK_N).step_by(13) {
                    let rows = split_rows_on(2, m, n, a_on_chip, b_on_chip);
                    let (chosen, other) = (prepared(m, n, rows), prepared(m, n, !rows));
                    // The rules compare whole sizes (even shares); shares are whole units.
                    assert!(
                        chosen <= other + 2 * CORE_SPLIT_UNIT,
                        "{m} x {n}, on chip a {a_on_chip} b {b_on_chip}: rows {rows}"
                    );
                }
            }
        }
        // The bmm of the demo: each core transposes 64 or 66 of the 130 rows of `x`.
        assert!(split_rows_on(2, 130, 200, true, false));
        // Columns when `b` is the larger, or with `a` loaded by transposed DMA.
        assert!(!split_rows_on(2, 130, 530, true, false));
        assert!(!split_rows_on(2, 130, 200, false, false));
        // llama-tiny's `[128, 64] · [64, 64]ᵀ`: 64 rows each, not 32 columns each.
        assert!(split_rows_on(2, 128, 64, true, true));
    }

    #[test]
    fn ragged_m_k_n_in_fp32() {
        check(130, 260, 515, DType::F32, 1e-5);
        check(1, 5, 3, DType::F32, 1e-6);
    }

    #[test]
    fn wide_outputs_span_several_psum_blocks() {
        // 4700 columns = four full 1024-column blocks + a ragged block (512 + 92 columns).
        check(20, 150, 4700, DType::F32, 1e-5);
    }

    #[test]
    fn bf16_inputs_accumulate_in_fp32_and_round_once() {
        // Inputs are exact bf16 values; products and sums are fp32, then one bf16 rounding.
        check(129, 300, 513, DType::BF16, 4e-3);
    }

    #[test]
    fn backward_is_two_transposed_products() {
        let (m, k, n) = (130, 70, 140);
        let (g, x, w) = (
            arr(&[m, n], DType::F32, 1),
            arr(&[m, k], DType::F32, 2),
            arr(&[k, n], DType::F32, 3),
        );
        let out = run_kernel(
            &MATMUL_BACKWARD_KERNEL,
            &[g.clone(), x.clone(), w.clone()],
            &[],
            Target::Trn2,
        )
        .unwrap();
        let gx = naive(&g.values, false, &w.values, true, m, n, k);
        let gw = naive(&x.values, true, &g.values, false, k, m, n);
        close(&out[0].values, &gx, 1e-5, "grad_x");
        close(&out[1].values, &gw, 1e-5, "grad_w");
    }

    #[test]
    fn linear_weight_blocks_held_on_chip_serve_several_output_blocks() {
        // 4700 output columns: one held 4096-column `weightᵀ` block (four 1024-column output
        // blocks) and a ragged held block of 604 (512 + 92), over two row blocks of `x`.
        let (m, k, n) = (520, 40, 4700);
        let (x, w) = (arr(&[m, k], DType::F32, 0), arr(&[n, k], DType::F32, 5));
        let bias = arr(&[n], DType::F32, 9);
        let y = run_kernel(
            &LINEAR_KERNEL,
            &[x.clone(), w.clone(), bias.clone()],
            &[],
            Target::Trn2,
        )
        .unwrap();
        assert_eq!(y[0].shape, vec![m, n]);
        let mut want = naive(&x.values, false, &w.values, true, m, k, n);
        for (i, v) in want.iter_mut().enumerate() {
            *v += bias.values[i % n] as f64;
        }
        close(&y[0].values, &want, 1e-5, "y");
    }

    /// An empty contraction would sum nothing (NaN from the poisoned accumulator on the
    /// simulator): each kernel's contract refuses it, naming the dimension.
    #[test]
    fn empty_contractions_are_contract_errors() {
        let f = DType::F32;
        let cases: [(&nki_core::KernelDef, Vec<HostArray>, &str); 6] = [
            (
                &MATMUL_KERNEL,
                vec![arr(&[4, 0], f, 0), arr(&[0, 5], f, 1)],
                "K >= 1",
            ),
            (
                &BMM_KERNEL,
                vec![arr(&[2, 4, 0], f, 0), arr(&[2, 0, 5], f, 1)],
                "K >= 1",
            ),
            (
                &LINEAR_KERNEL,
                vec![arr(&[4, 0], f, 0), arr(&[5, 0], f, 1), arr(&[5], f, 2)],
                "K >= 1",
            ),
            (
                &MATMUL_BACKWARD_KERNEL,
                vec![arr(&[4, 0], f, 0), arr(&[4, 3], f, 1), arr(&[3, 0], f, 2)],
                "N >= 1",
            ),
            (
                &BMM_BACKWARD_KERNEL,
                vec![
                    arr(&[2, 4, 0], f, 0),
                    arr(&[2, 4, 3], f, 1),
                    arr(&[2, 3, 0], f, 2),
                ],
                "N >= 1",
            ),
            (
                &LINEAR_BACKWARD_KERNEL,
                vec![arr(&[4, 0], f, 0), arr(&[4, 3], f, 1), arr(&[0, 3], f, 2)],
                "N >= 1",
            ),
        ];
        for (def, inputs, rule) in cases {
            let err = run_kernel(def, &inputs, &[], Target::Trn2).unwrap_err();
            assert!(
                matches!(err, nki_core::NkiError::Contract(_)) && err.to_string().contains(rule),
                "{}: {err}",
                def.name
            );
        }
    }

    /// An empty batch has zero weight and bias gradients (sums over no rows), as in torch.
    #[test]
    fn an_empty_batch_has_zero_linear_gradients() {
        let f = DType::F32;
        let inputs = [arr(&[0, 5], f, 0), arr(&[0, 3], f, 1), arr(&[5, 3], f, 2)];
        let out = run_kernel(&LINEAR_BACKWARD_KERNEL, &inputs, &[], Target::Trn2).unwrap();
        let shapes: Vec<&[usize]> = out.iter().map(|o| o.shape.as_slice()).collect();
        assert_eq!(shapes, [&[0, 3][..], &[5, 3], &[5]]);
        assert!(out[1..].iter().all(|o| o.values.iter().all(|&v| v == 0.0)));
    }
}
