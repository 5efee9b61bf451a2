//! The backward of [`super::rope`]: `grad_x = g · cos + swap_halves(g) · [sin₂, −sin₁]` per head
//! chunk for the incoming gradient `g` of each of `q` and `k`, and the per-position sums over
//! every batch and head of both, `grad_cos = Σ g · x` and `grad_sin = Σ g · rotate_half(x)`.
//!
//! Each head tile's halves are swapped once (`swap_halves(g)`, small copies shared between the
//! scalar and vector engines); after that every product is one whole-tile instruction, since
//! `Σ g · rotate_half(x)` is `Σ swap_halves(g) · x` with its halves swapped back (and the first
//! negated) once per position tile. The sums over heads run on the tensor engine: identity
//! matmuls add each head's products into fp32 PSUM accumulators. For 16-bit data the rotation's
//! own sum `g · cos + swapped` is also two identity matmuls into PSUM, read back by the scalar
//! engine; the vector engine then only forms products, and GpSimd takes `g · x`.

use super::{
    chunks, for_each_head_group, half_pairs, head_rows, position_tables, positions_per_row,
};
use crate::tiling::{identity, psum_banks};
use nki_core::prelude::*;

/// Most elements of a backward tile row: the two position sums take two PSUM banks each at
/// this width, and two heads' rotation sums the other four.
const MAX_ROW_ELEMENTS: usize = 2 * PSUM_BANK_FMAX;

/// Where the backward keeps its sums, from the tile width and dtype.
#[derive(Clone, Copy, Debug)]
struct Placement {
    /// The per-position sums over heads live in PSUM and are added by identity matmuls; else
    /// (rows wider than [`MAX_ROW_ELEMENTS`], i.e. `D > 1024`) in SBUF, added on GpSimd.
    sums_in_psum: bool,
    /// `g · cos + swapped` is summed in PSUM by two identity matmuls (16-bit data within the
    /// PSUM budget); else it is one GpSimd instruction.
    rotation_in_psum: bool,
    /// How many of a tile's half-chunk copies (`swap_halves(g)`) run on the scalar engine; the
    /// vector engine takes the rest.
    scalar_halves: usize,
}

impl Placement {
    fn new(width: usize, d: usize, dtype: DType) -> Placement {
        let sums_in_psum = width <= MAX_ROW_ELEMENTS;
        let rotation_in_psum = sums_in_psum && dtype.size_bytes() <= 2;
        let halves = 2 * (width / d.max(1));
        // With the rotation in PSUM the scalar engine also reads it back, one instruction over
        // the tile; the split balances the scalar and vector engines in the cost model.
        let scalar_halves = if rotation_in_psum {
            3 * halves / 4
        } else {
            halves
        };
        Placement {
            sums_in_psum,
            rotation_in_psum,
            scalar_halves,
        }
    }
}

/// An fp32 `[rows, width]` sum over heads: PSUM banks added to by identity matmuls (with the
/// `[rows, rows]` identity as stationary), or one SBUF tile added to on GpSimd.
enum HeadSum {
    Psum {
        banks: Vec<(usize, Tile)>,
        eye: TileRegion,
    },
    Sbuf(Tile),
}

impl HeadSum {
    /// A zeroed sum; in PSUM when there is an identity to add with.
    fn new(rows: usize, width: usize, eye: Option<&Tile>) -> HeadSum {
        match eye {
            Some(eye) => HeadSum::Psum {
                banks: psum_banks(width)
                    .map(|(c0, n)| {
                        let bank = psum([rows, n], DType::F32);
                        memset(&bank, 0.0);
                        (c0, bank)
                    })
                    .collect(),
                eye: eye.rows(rows).cols(0, rows),
            },
            None => {
                let acc = sbuf([rows, width], DType::F32);
                memset(&acc, 0.0);
                HeadSum::Sbuf(acc)
            }
        }
    }

    /// `self += term`.
    fn add(&self, term: &Tile) {
        match self {
            HeadSum::Psum { banks, eye } => {
                for (c0, bank) in banks {
                    nc_matmul(bank, eye, term.cols(*c0, bank.shape()[1]), true);
                }
            }
            HeadSum::Sbuf(acc) => {
                tensor_tensor(acc, acc, term, BinOp::Add).on(ElementwiseEngine::GpSimd);
            }
        }
    }

    /// The sum copied into one fp32 SBUF tile.
    fn into_sbuf(self, rows: usize, width: usize) -> Tile {
        match self {
            HeadSum::Sbuf(acc) => acc,
            HeadSum::Psum { banks, .. } => {
                let out = sbuf([rows, width], DType::F32);
                for (c0, bank) in &banks {
                    tensor_copy(out.cols(*c0, bank.shape()[1]), bank);
                }
                out
            }
        }
    }
}

/// One head tile between the two stages of the backward's pipeline.
struct HeadTile {
    /// `g · cos`.
    g_cos: Tile,
    /// `swap_halves(g) · rsin`.
    swapped: Tile,
    /// `g · x`, this head's term of `grad_cos`.
    g_x: Tile,
    /// `swap_halves(g) · x`, this head's term of `grad_sin` (halves swapped).
    swapped_x: Tile,
}

/// First stage for one head: loads `g` and `x`, swaps `g`'s halves and forms every product.
fn start_head(
    g: HbmView,
    x: HbmView,
    ct: &Tile,
    rsin: &Tile,
    d: usize,
    placement: Placement,
) -> HeadTile {
    let [rows, width] = ct.shape();
    let dt = ct.dtype();
    let (gt, xt) = (sbuf([rows, width], dt), sbuf([rows, width], dt));
    dma_copy(&gt, g);
    dma_copy(&xt, x);
    let sg = sbuf([rows, width], dt);
    for (k, (_, dst, src, h)) in half_pairs(width, d).enumerate() {
        if k < placement.scalar_halves {
            activation(sg.cols(dst, h), ActFn::Identity, gt.cols(src, h), None, 1.0);
        } else {
            tensor_copy(sg.cols(dst, h), gt.cols(src, h));
        }
    }
    let product = |a: &Tile, b: &Tile, engine: ElementwiseEngine| {
        let out = sbuf([rows, width], dt);
        tensor_tensor(&out, a, b, BinOp::Multiply).on(engine);
        out
    };
    let g_cos = product(&gt, ct, ElementwiseEngine::Vector);
    let swapped = product(&sg, rsin, ElementwiseEngine::Vector);
    let g_x = product(&gt, &xt, ElementwiseEngine::GpSimd);
    let swapped_x = product(&sg, &xt, ElementwiseEngine::Vector);
    HeadTile {
        g_cos,
        swapped,
        g_x,
        swapped_x,
    }
}

/// Second stage: `grad_x = g · cos + swapped` into `out`, and the head's terms added to the sums.
fn finish_head(
    t: HeadTile,
    out: HbmView,
    sums: &[HeadSum; 2],
    eye: Option<&Tile>,
    placement: Placement,
) {
    let [rows, width] = t.g_cos.shape();
    let grad = sbuf([rows, width], t.g_cos.dtype());
    match eye {
        Some(eye) if placement.rotation_in_psum => {
            for (c0, n) in psum_banks(width) {
                let bank = psum([rows, n], DType::F32);
                let stationary = eye.rows(rows).cols(0, rows);
                nc_matmul(&bank, &stationary, t.g_cos.cols(c0, n), false);
                nc_matmul(&bank, &stationary, t.swapped.cols(c0, n), true);
                activation(grad.cols(c0, n), ActFn::Identity, &bank, None, 1.0);
            }
        }
        _ => {
            tensor_tensor(&grad, &t.g_cos, &t.swapped, BinOp::Add).on(ElementwiseEngine::GpSimd);
        }
    }
    dma_copy(out, &grad);
    sums[0].add(&t.g_x);
    sums[1].add(&t.swapped_x);
}

/// Gradients of `rope`: `grad_q = grad_q_out · cos − rotate_half(grad_q_out · sin)` (the
/// rotation is linear, and its transpose is its negation), the same for `k`; and, summed over
/// every batch and head of both, `grad_cos = Σ grad · x` and `grad_sin = Σ grad ·
/// rotate_half(x)` per position (products in the input dtype, as autograd forms them, summed in
/// fp32 and rounded once).
#[kernel(
    shape(grad_q_out = [B, H, S, D], grad_k_out = [B, Hkv, S, D], q = [B, H, S, D], k = [B, Hkv, S, D], cos = [S, D], sin = [S, D])
        -> (grad_q = [B, H, S, D], grad_k = [B, Hkv, S, D], grad_cos = [S, D], grad_sin = [S, D]),
    dtype(grad_q_out in {f32, bf16, f16}, grad_k_out = grad_q_out, q = grad_q_out, k = grad_q_out, cos = grad_q_out, sin = grad_q_out)
        -> (grad_q_out, grad_q_out, grad_q_out, grad_q_out),
    require(D % 2 == 0),
    shard(whole(D), together(H, Hkv), reads(grad_q: grad_q_out, cos, sin), reads(grad_k: grad_k_out, cos, sin)),
    tolerance(reduction(B)),
)]
pub fn rope_backward(
    grad_q_out: &Hbm,
    grad_k_out: &Hbm,
    q: &Hbm,
    k: &Hbm,
    cos: &Hbm,
    sin: &Hbm,
) -> (Hbm, Hbm, Hbm, Hbm) {
    let dt = grad_q_out.dtype();
    let grad_q = shared_hbm(grad_q_out.shape(), dt);
    let grad_k = shared_hbm(grad_k_out.shape(), dt);
    let grad_cos = shared_hbm(cos.shape(), dt);
    let grad_sin = shared_hbm(sin.shape(), dt);
    let (s, d) = (cos.dim(0), cos.dim(1));
    let per_row = positions_per_row(s, d, MAX_ROW_ELEMENTS);
    let (rows, width) = (s / per_row, per_row * d);
    let placement = Placement::new(width, d, dt);
    let eye = placement.sums_in_psum.then(|| identity(dt));
    for_each_program_tile(rows, PMAX, |pos| {
        let (ct, rsin) = position_tables(cos, sin, width, &pos, true);
        let sums = [0, 1].map(|_| HeadSum::new(pos.size, width, eye.as_ref()));
        // The heads software-pipelined one deep: head j + 1's swaps and products are issued
        // before head j's sums, so the tensor and scalar engines work on head j while the
        // vector engine and GpSimd form head j + 1's products.
        for (g, x, out) in [(grad_q_out, q, &grad_q), (grad_k_out, k, &grad_k)] {
            let view = |t: &Hbm, head: &AffineExpr| head_rows(t, width, rows, &pos, head);
            for_each_head_group(0..g.numel() / (s * d).max(1), |heads| {
                let start = |head: &AffineExpr| {
                    start_head(view(g, head), view(x, head), &ct, &rsin, d, placement)
                };
                let mut pending = heads.first().map(start);
                for (j, head) in heads.iter().enumerate() {
                    let next = heads.get(j + 1).map(start);
                    let Some(t) = std::mem::replace(&mut pending, next) else {
                        break;
                    };
                    finish_head(t, view(out, head), &sums, eye.as_ref(), placement);
                }
            });
        }
        // grad_cos = Σ g · x; grad_sin = [−Σ g₁ · x₂, Σ g₂ · x₁], the halves of Σ swap(g) · x
        // swapped back.
        let [sum_gx, sum_sx] = sums.map(|sum| sum.into_sbuf(pos.size, width));
        let res_cos = sbuf([pos.size, width], dt);
        tensor_copy(&res_cos, &sum_gx);
        let res_sin = sbuf([pos.size, width], dt);
        for (c0, h) in chunks(width, d) {
            tensor_scalar(
                res_sin.cols(c0, h),
                sum_sx.cols(c0 + h, h),
                BinOp::Multiply,
                -1.0,
            );
            tensor_copy(res_sin.cols(c0 + h, h), sum_sx.cols(c0, h));
        }
        for (res, out) in [(res_cos, &grad_cos), (res_sin, &grad_sin)] {
            dma_copy(
                out.reshape(&[rows, width])
                    .rows(pos.start.clone(), pos.size),
                &res,
            );
        }
    });
    (grad_q, grad_k, grad_cos, grad_sin)
}
