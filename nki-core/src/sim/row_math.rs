//! The arithmetic the engines apply to one row of a tile: binary operators as concrete
//! closures (`with_op!`), activations, row reductions (their order is the simulator's numerics
//! model), and which columns `range_select` keeps.

use crate::ir::{ActFn, BinOp};

/// Runs `body` with `$f` bound to operator `$op` as a concrete closure, so the per-element loop
/// in `body` is compiled once per arithmetic operator (and vectorised) instead of matching the
/// operator on every element; comparisons share one generic instance.
macro_rules! with_op {
    ($op:expr, |$f:ident| $body:expr) => {
        match $op {
            $crate::ir::BinOp::Add => {
                let $f = |a: f32, b: f32| a + b;
                $body
            }
            $crate::ir::BinOp::Subtract => {
                let $f = |a: f32, b: f32| a - b;
                $body
            }
            $crate::ir::BinOp::Multiply => {
                let $f = |a: f32, b: f32| a * b;
                $body
            }
            $crate::ir::BinOp::Maximum => {
                let $f = |a: f32, b: f32| a.max(b);
                $body
            }
            $crate::ir::BinOp::Minimum => {
                let $f = |a: f32, b: f32| a.min(b);
                $body
            }
            $crate::ir::BinOp::Divide => {
                let $f = |a: f32, b: f32| a / b;
                $body
            }
            other => {
                let $f = move |a: f32, b: f32| other.apply(a, b);
                $body
            }
        }
    };
}

pub(crate) use with_op;

/// `out[i] = func(x[i] * scale + bias)`, with the common functions in their own loops so they
/// vectorise.
pub(crate) fn apply_activation(func: ActFn, x: &[f32], scale: f32, bias: f32, out: &mut [f32]) {
    crate::wide::wide(
        #[inline(always)]
        || activation_loops(func, x, scale, bias, out),
    );
}

#[inline(always)]
fn activation_loops(func: ActFn, x: &[f32], scale: f32, bias: f32, out: &mut [f32]) {
    let pre = |v: f32| v * scale + bias;
    match func {
        ActFn::Identity => out.iter_mut().zip(x).for_each(|(o, v)| *o = pre(*v)),
        ActFn::Square => out.iter_mut().zip(x).for_each(|(o, v)| {
            let t = pre(*v);
            *o = t * t
        }),
        ActFn::Exp => crate::engine_math::exp_row_inline(x, scale, bias, out),
        // exp(−t) for the whole row first (vectorised, the bits of `ActFn::apply`), then t / (1 + ·).
        ActFn::Silu => {
            crate::engine_math::exp_row_inline(x, -scale, -bias, out);
            out.iter_mut()
                .zip(x)
                .for_each(|(o, v)| *o = pre(*v) / (1.0 + *o));
        }
        // σ = 1 / (1 + exp(−t)) from the row's exponentials, then σ · (1 + t · (1 − σ)).
        ActFn::SiluDx => {
            crate::engine_math::exp_row_inline(x, -scale, -bias, out);
            out.iter_mut().zip(x).for_each(|(o, v)| {
                let s = 1.0 / (1.0 + *o);
                *o = s * (1.0 + pre(*v) * (1.0 - s));
            });
        }
        ActFn::Sigmoid => {
            crate::engine_math::exp_row_inline(x, -scale, -bias, out);
            out.iter_mut().for_each(|o| *o = 1.0 / (1.0 + *o));
        }
        f => out
            .iter_mut()
            .zip(x)
            .for_each(|(o, v)| *o = f.apply(pre(*v))),
    }
}

/// The columns `lo..hi` of an `n`-column row that `range_select` keeps: those whose index
/// `i = f + range_start` (in fp32) satisfies both comparisons. Each comparison holds on a
/// contiguous range of `f` (`i` does not decrease with `f`), so their intersection is one too;
/// the ranges are found by binary search and agree element for element with evaluating the
/// comparisons (a NaN bound selects nothing).
pub(crate) fn selected_columns(
    n: usize,
    range_start: f32,
    a: (BinOp, f32),
    b: (BinOp, f32),
) -> (usize, usize) {
    let holds =
        |f: usize, (op, bound): (BinOp, f32)| op.apply(f as f32 + range_start, bound) != 0.0;
    // The first column where `cond` holds, for a `cond` false up to some column and true after.
    let first = |cond: &dyn Fn(usize) -> bool| {
        let (mut lo, mut hi) = (0, n);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if cond(mid) {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        lo
    };
    let range = |c: (BinOp, f32)| -> (usize, usize) {
        match c.0 {
            // True from some column on.
            BinOp::Greater | BinOp::GreaterEqual => (first(&|f| holds(f, c)), n),
            // True up to some column.
            BinOp::Less | BinOp::LessEqual => (0, first(&|f| !holds(f, c))),
            // i == bound: from the first i >= bound to the first i > bound.
            BinOp::Equal => (
                first(&|f| holds(f, (BinOp::GreaterEqual, c.1))),
                first(&|f| holds(f, (BinOp::Greater, c.1))),
            ),
            // Trace rejects other operators; evaluate them column by column anyway.
            _ => {
                let lo = (0..n).find(|&f| holds(f, c)).unwrap_or(n);
                let hi = (lo..n).find(|&f| !holds(f, c)).unwrap_or(n);
                (lo, hi)
            }
        }
    };
    let ((a0, a1), (b0, b1)) = (range(a), range(b));
    let (lo, hi) = (a0.max(b0), a1.min(b1));
    if lo < hi { (lo, hi) } else { (0, 0) }
}

/// Reduces a row with a reduction operator, deterministically: sums in eight interleaved
/// partial sums (lane `k` adds elements `k`, `k + 8`, ...), then the lanes in order, then the
/// tail; other operators in any order (their result does not depend on it).
pub(crate) fn reduce_row(op: BinOp, row: &[f32]) -> f32 {
    crate::wide::wide(
        #[inline(always)]
        || reduce_row_loops(op, row),
    )
}

#[inline(always)]
fn reduce_row_loops(op: BinOp, row: &[f32]) -> f32 {
    match op {
        BinOp::Add => sum_of(row),
        BinOp::Maximum => max_of(row),
        op => {
            let init = op
                .reduce_identity()
                .expect("trace checked the reduce operator");
            row.iter().fold(init, |a, v| op.apply(a, *v))
        }
    }
}

/// The sum of a row in eight interleaved lanes (see [`reduce_row`]).
#[inline(always)]
fn sum_of(row: &[f32]) -> f32 {
    let mut lanes = [0.0f32; 8];
    let chunks = row.chunks_exact(8);
    let tail = chunks.remainder();
    for c in chunks {
        for (l, v) in lanes.iter_mut().zip(c) {
            *l += v;
        }
    }
    let total = lanes.iter().fold(0.0, |a, v| a + v);
    tail.iter().fold(total, |a, v| a + v)
}

/// The maximum of a row as a left-to-right `f32::max` fold from `-inf` computes it (NaN elements
/// are passed over); the maximum does not depend on the order, so eight lanes run independently.
#[inline(always)]
fn max_of(row: &[f32]) -> f32 {
    let mut lanes = [f32::NEG_INFINITY; 8];
    let chunks = row.chunks_exact(8);
    let tail = chunks.remainder();
    for c in chunks {
        for (l, v) in lanes.iter_mut().zip(c) {
            *l = l.max(*v);
        }
    }
    let m = tail.iter().fold(f32::NEG_INFINITY, |a, v| a.max(*v));
    lanes.iter().fold(m, |a, v| a.max(*v))
}

/// `bn_stats` of one partition's row: `(count, mean, variance · count)` of its even-indexed
/// elements, then of its odd-indexed ones, in fp32: the mean from the sum, then the squared
/// deviations from that mean summed (two passes; the hardware's own order of operations is not
/// documented). Sums run in eight lanes per half, as [`reduce_row`]'s do. An empty half (a
/// one-element row's odd half) is `(0, 0, 0)`.
pub(crate) fn bn_stats_row(row: &[f32]) -> [f32; 6] {
    crate::wide::wide(
        #[inline(always)]
        || bn_stats_loops(row),
    )
}

#[inline(always)]
fn bn_stats_loops(row: &[f32]) -> [f32; 6] {
    let sums = half_sums(row, |v| v);
    let counts = [row.len().div_ceil(2) as f32, (row.len() / 2) as f32];
    let means = [0, 1].map(|h| {
        if counts[h] > 0.0 {
            sums[h] / counts[h]
        } else {
            0.0
        }
    });
    let (me, mo) = (means[0], means[1]);
    let squares = half_sums_pairs(row, |e, o| ((e - me) * (e - me), (o - mo) * (o - mo)));
    let mut out = [0.0f32; 6];
    for h in 0..2 {
        if counts[h] > 0.0 {
            out[3 * h..3 * h + 3].copy_from_slice(&[counts[h], means[h], squares[h]]);
        }
    }
    out
}

/// `[Σ f(even elements), Σ f(odd elements)]` of a row, eight lanes per half.
#[inline(always)]
fn half_sums(row: &[f32], f: impl Fn(f32) -> f32) -> [f32; 2] {
    half_sums_pairs(row, |e, o| (f(e), f(o)))
}

/// `[Σ first, Σ second]` of `f(even, odd)` over a row's element pairs (a trailing even element
/// pairs with nothing: its odd term is dropped), eight lanes per half.
#[inline(always)]
fn half_sums_pairs(row: &[f32], f: impl Fn(f32, f32) -> (f32, f32)) -> [f32; 2] {
    let (mut even, mut odd) = ([0.0f32; 8], [0.0f32; 8]);
    let chunks = row.chunks_exact(16);
    let tail = chunks.remainder();
    for c in chunks {
        for j in 0..8 {
            let (e, o) = f(c[2 * j], c[2 * j + 1]);
            even[j] += e;
            odd[j] += o;
        }
    }
    let mut totals = [even.iter().sum::<f32>(), odd.iter().sum::<f32>()];
    for pair in tail.chunks(2) {
        let (e, o) = f(pair[0], pair.get(1).copied().unwrap_or(0.0));
        totals[0] += e;
        if pair.len() == 2 {
            totals[1] += o;
        }
    }
    totals
}

/// `bn_aggr` of one partition's `(count, mean, variance · count)` triples: their combined mean
/// and biased variance, in fp32, merging the triples in order with Chan et al.'s pairwise
/// update (`δ = mean_b − mean_a`, `mean += δ · n_b / n`, `M2 = M2_a + M2_b + δ² · n_a · n_b / n`).
/// Triples with a zero count are skipped; with none left the result is NaN.
pub(crate) fn bn_aggr_row(triples: &[f32]) -> [f32; 2] {
    let (mut n, mut mean, mut m2) = (0.0f32, 0.0f32, 0.0f32);
    for t in triples.chunks_exact(3) {
        let (nb, mb, m2b) = (t[0], t[1], t[2]);
        if nb == 0.0 {
            continue;
        }
        let total = n + nb;
        let delta = mb - mean;
        mean += delta * (nb / total);
        m2 += m2b + delta * delta * (n * nb / total);
        n = total;
    }
    if n == 0.0 {
        return [f32::NAN, f32::NAN];
    }
    [mean, m2 / n]
}
