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
        // The exponents first (into `out`), their exponentials a chunk at a time, then
        // t / (1 + ·): the bits of `ActFn::apply`.
        ActFn::GeluTanh => {
            use crate::ir::gelu_tanh_exponent;
            out.iter_mut()
                .zip(x)
                .for_each(|(o, v)| *o = gelu_tanh_exponent(pre(*v)));
            let mut exponents = [0.0f32; 64];
            for chunk in out.chunks_mut(exponents.len()) {
                let e = &mut exponents[..chunk.len()];
                e.copy_from_slice(chunk);
                crate::engine_math::exp_row_inline(e, 1.0, 0.0, chunk);
            }
            out.iter_mut()
                .zip(x)
                .for_each(|(o, v)| *o = pre(*v) / (1.0 + *o));
        }
        // `ActFn::apply`'s f64 expressions, their `libm::erf` eight at a time (the same bits).
        ActFn::Gelu | ActFn::GeluDx => erf_lanes(x, pre, out, |t, erf| func.given_erf(t, erf)),
        f => out
            .iter_mut()
            .zip(x)
            .for_each(|(o, v)| *o = f.apply(pre(*v))),
    }
}

/// `out[i] = f(t, erf(t/√2))` with `t = pre(x[i])` in f64 (the exact GELU and its derivative,
/// [`ActFn::given_erf`]), `libm::erf` evaluated over blocks of the row ([`crate::erf::erf_row`],
/// the same bits).
#[inline(always)]
fn erf_lanes(x: &[f32], pre: impl Fn(f32) -> f32, out: &mut [f32], f: impl Fn(f64, f64) -> f32) {
    const BLOCK: usize = 256;
    let (mut t, mut arg, mut erf) = ([0.0f64; BLOCK], [0.0f64; BLOCK], [0.0f64; BLOCK]);
    for (o, v) in out.chunks_mut(BLOCK).zip(x.chunks(BLOCK)) {
        let n = v.len();
        for ((t, a), v) in t.iter_mut().zip(&mut arg).zip(v) {
            *t = f64::from(pre(*v));
            *a = *t * std::f64::consts::FRAC_1_SQRT_2;
        }
        crate::erf::erf_row(&arg[..n], &mut erf[..n]);
        for ((o, t), e) in o.iter_mut().zip(&t).zip(&erf) {
            *o = f(*t, *e);
        }
    }
}

/// The columns `lo..hi` of an `n`-column row that `range_select` keeps: those whose index
/// `i = f + range_start` (in fp32) satisfies both comparisons. Each comparison holds on a
/// contiguous range of `f` (`i` does not decrease with `f`), so their intersection is one too,
/// and each end is where a comparison changes: [`first_column_where`] finds it. The ranges agree
/// element for element with evaluating the comparisons (a NaN bound selects nothing).
#[inline]
pub(crate) fn selected_columns(
    n: usize,
    range_start: f32,
    a: (BinOp, f32),
    b: (BinOp, f32),
) -> (usize, usize) {
    let ((a0, a1), (b0, b1)) = (
        holding_columns(n, range_start, a),
        holding_columns(n, range_start, b),
    );
    let (lo, hi) = (a0.max(b0), a1.min(b1));
    if lo < hi { (lo, hi) } else { (0, 0) }
}

/// The columns `f` of `0..n` where `(f + range_start) op bound` holds (in fp32), for `range_select`'s
/// comparison operators: a contiguous range.
#[inline(always)]
fn holding_columns(n: usize, range_start: f32, (op, bound): (BinOp, f32)) -> (usize, usize) {
    let reaching =
        |past: bool, cond: fn(f32, f32) -> bool| first_reaching(n, range_start, bound, past, cond);
    match op {
        BinOp::Greater => (reaching(true, |i, b| i > b), n),
        BinOp::GreaterEqual => (reaching(false, |i, b| i >= b), n),
        // True up to the first column where it fails (at once for a NaN bound).
        BinOp::Less => (
            0,
            reaching(false, |i, b| i.partial_cmp(&b).is_none_or(|o| o.is_ge())),
        ),
        BinOp::LessEqual => (
            0,
            reaching(true, |i, b| i.partial_cmp(&b).is_none_or(|o| o.is_gt())),
        ),
        BinOp::Equal => (reaching(false, |i, b| i >= b), reaching(true, |i, b| i > b)),
        // Trace rejects other operators; evaluate them column by column anyway.
        _ => {
            let holds = |f: usize| op.apply(f as f32 + range_start, bound) != 0.0;
            let lo = (0..n).find(|&f| holds(f)).unwrap_or(n);
            let hi = (lo..n).find(|&f| !holds(f)).unwrap_or(n);
            (lo, hi)
        }
    }
}

/// The first column `f` of `0..n` where `cond(f + range_start, bound)` holds in fp32 (`n` if
/// none), `cond` being `≥`-like (`past`: `>`-like) in the index: the real-valued estimate
/// `⌈bound − range_start⌉` (`⌊·⌋ + 1`), confirmed by [`first_column_where`].
#[inline(always)]
fn first_reaching(
    n: usize,
    range_start: f32,
    bound: f32,
    past: bool,
    cond: impl Fn(f32, f32) -> bool,
) -> usize {
    let gap = f64::from(bound) - f64::from(range_start);
    let guess = if past { gap.floor() + 1.0 } else { gap.ceil() };
    // `as` saturates: below 0 (and NaN) is 0, past `usize::MAX` is `usize::MAX`.
    first_column_where(n, guess as usize, |f| cond(f as f32 + range_start, bound))
}

/// The first column of `0..n` where `cond` holds (`n` if none), for a `cond` false up to some
/// column and true from it on. `guess` (saturated into `0..=n`) is checked first and moved a
/// few columns if it is off by fp32 rounding; a binary search decides otherwise.
#[inline(always)]
fn first_column_where(n: usize, guess: usize, cond: impl Fn(usize) -> bool) -> usize {
    let mut f = guess.min(n);
    for _ in 0..4 {
        let here = f == n || cond(f);
        let before = f > 0 && cond(f - 1);
        match (before, here) {
            (false, true) => return f,
            (true, _) => f -= 1,
            (false, false) => f += 1,
        }
    }
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
}

/// Reduces a row with a reduction operator, deterministically: sums in eight interleaved
/// partial sums (lane `k` adds elements `k`, `k + 8`, ...), then the lanes in order, then the
/// tail; other operators in any order (their result does not depend on it).
pub(crate) fn reduce_row(op: BinOp, row: &[f32]) -> f32 {
    crate::wide::wide(
        #[inline(always)]
        || reduce_row_inline(op, row),
    )
}

/// [`reduce_row`]'s loops, for callers that compile it into their own wide loops.
#[inline(always)]
pub(crate) fn reduce_row_inline(op: BinOp, row: &[f32]) -> f32 {
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

/// The maximum of a row as a left-to-right fold from `-inf` computes it, NaN elements passed
/// over (`f32::max`'s rule). The order changes nothing but which of equal maxima (`+0`, `-0`)
/// is kept, so 32 lanes run independently (four 256-bit vectors; lane `k` takes elements `k`,
/// `k + 32`, ...), and the lanes are halved pairwise down to one. Of equal maxima, the one in
/// the lowest lane is kept, the earliest in it.
#[inline(always)]
fn max_of(row: &[f32]) -> f32 {
    // `v > l` is false for a NaN `v` (and for a tie): the running maximum stays. Being a
    // select on one comparison, it compiles to a single `max` instruction per vector, where
    // `f32::max` adds a compare and a blend for the NaN on either side (`l` is never NaN).
    #[inline(always)]
    fn larger(l: f32, v: f32) -> f32 {
        if v > l { v } else { l }
    }
    let mut lanes = [f32::NEG_INFINITY; 32];
    let chunks = row.chunks_exact(32);
    let tail = chunks.remainder();
    for c in chunks {
        for (l, v) in lanes.iter_mut().zip(c) {
            *l = larger(*l, *v);
        }
    }
    for (l, v) in lanes.iter_mut().zip(tail) {
        *l = larger(*l, *v);
    }
    // Fixed-size halves compile to a few vector maxes, not a chain of 31 scalar ones.
    let l16: [f32; 16] = std::array::from_fn(|i| larger(lanes[i], lanes[i + 16]));
    let l8: [f32; 8] = std::array::from_fn(|i| larger(l16[i], l16[i + 8]));
    let l4: [f32; 4] = std::array::from_fn(|i| larger(l8[i], l8[i + 4]));
    larger(larger(l4[0], l4[2]), larger(l4[1], l4[3]))
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
    let sums = half_sums(row, [0.0; 2], |v, _| v);
    let counts = [row.len().div_ceil(2) as f32, (row.len() / 2) as f32];
    let means = [0, 1].map(|h| {
        if counts[h] > 0.0 {
            sums[h] / counts[h]
        } else {
            0.0
        }
    });
    let squares = half_sums(row, means, |v, m| (v - m) * (v - m));
    let mut out = [0.0f32; 6];
    for h in 0..2 {
        if counts[h] > 0.0 {
            out[3 * h..3 * h + 3].copy_from_slice(&[counts[h], means[h], squares[h]]);
        }
    }
    out
}

/// `[Σ term(e, centre[0]) over the even elements, Σ term(o, centre[1]) over the odd ones]`, eight
/// lanes per half: lane `j` of the even half adds elements `16k + 2j` for `k = 0, 1, ...` in
/// order, lane `j` of the odd half elements `16k + 2j + 1`; then each half's lanes in order, then
/// the tail (the elements after the last full 16) in order. Kept as sixteen interleaved lanes,
/// lane `i` adding elements `16k + i`: the same chains, laid out as the row is, so one vector
/// add per 16 elements makes them.
#[inline(always)]
fn half_sums(row: &[f32], centre: [f32; 2], term: impl Fn(f32, f32) -> f32) -> [f32; 2] {
    let centres: [f32; 16] = std::array::from_fn(|i| centre[i % 2]);
    let mut lanes = [0.0f32; 16];
    let chunks = row.chunks_exact(16);
    let tail = chunks.remainder();
    for c in chunks {
        for i in 0..16 {
            lanes[i] += term(c[i], centres[i]);
        }
    }
    let mut totals = [0, 1].map(|h| lanes.iter().skip(h).step_by(2).sum::<f32>());
    for (i, &v) in tail.iter().enumerate() {
        totals[i % 2] += term(v, centre[i % 2]);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `selected_columns` keeps exactly the columns where both comparisons hold when each is
    /// evaluated on its own fp32 index, including where the index steps over several columns at
    /// once (a large `range_start`), at the ends of the row, and for infinite and NaN bounds.
    #[test]
    fn selected_columns_are_the_columns_whose_comparisons_hold() {
        let ops = [
            BinOp::Greater,
            BinOp::GreaterEqual,
            BinOp::Less,
            BinOp::LessEqual,
            BinOp::Equal,
        ];
        let bounds = [
            -3.0,
            -0.5,
            0.0,
            0.5,
            1.0,
            6.0,
            6.5,
            7.0,
            299.0,
            300.0,
            301.5,
            1e9,
            16_777_217.0,
            16_777_230.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
        ];
        for n in [0, 1, 2, 7, 300] {
            for range_start in [0.0, -2.0, 2.5, 16_777_200.0, -1e9] {
                for op0 in ops {
                    for op1 in ops {
                        for b0 in bounds {
                            for b1 in [b0 + 4.0, 150.0, f32::NAN] {
                                let holds = |f: usize| {
                                    let i = f as f32 + range_start;
                                    op0.apply(i, b0) != 0.0 && op1.apply(i, b1) != 0.0
                                };
                                let want: Vec<usize> = (0..n).filter(|&f| holds(f)).collect();
                                let (lo, hi) =
                                    selected_columns(n, range_start, (op0, b0), (op1, b1));
                                assert_eq!(
                                    (lo..hi).collect::<Vec<_>>(),
                                    want,
                                    "n {n}, start {range_start}, {op0:?} {b0}, {op1:?} {b1}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }

    /// Every activation over a row gives the bits of `ActFn::apply` element by element (the
    /// functions with loops of their own included), over ordinary, large, tiny and non-finite
    /// inputs, with a scale and a bias.
    #[test]
    fn rows_have_the_bits_of_single_elements() {
        let x: Vec<f32> = (0..300)
            .map(|i| (i as f32 - 150.0) * 0.173)
            .chain([0.0, -0.0, 1e-30, -1e-30, 60.0, -60.0, 200.0, -200.0])
            .chain([f32::INFINITY, f32::NEG_INFINITY, f32::NAN])
            .collect();
        for &f in ActFn::ALL {
            let mut out = vec![0.0; x.len()];
            apply_activation(f, &x, 0.75, -0.5, &mut out);
            for (o, v) in out.iter().zip(&x) {
                let want = f.apply(*v * 0.75 - 0.5);
                assert!(
                    o.to_bits() == want.to_bits() || (o.is_nan() && want.is_nan()),
                    "{f:?}({v}): row {o}, element {want}"
                );
            }
        }
    }

    /// [`half_sums`] as its documentation states it: each half in eight lanes of its own,
    /// element by element.
    fn half_sums_by_the_book(
        row: &[f32],
        centre: [f32; 2],
        term: impl Fn(f32, f32) -> f32,
    ) -> [f32; 2] {
        let full = row.len() / 16 * 16;
        [0, 1].map(|h| {
            let mut lanes = [0.0f32; 8];
            for k in (0..full).step_by(16) {
                for (j, lane) in lanes.iter_mut().enumerate() {
                    *lane += term(row[k + 2 * j + h], centre[h]);
                }
            }
            let mut total = lanes.iter().sum::<f32>();
            for v in row[full..].iter().skip(h).step_by(2) {
                total += term(*v, centre[h]);
            }
            total
        })
    }

    /// [`max_of`] is the left-to-right `f32::max` fold from `-inf` (NaN passed over), on rows
    /// of every length around its lane and vector widths; of `+0` and `-0` it keeps the one in
    /// the lowest lane (element index mod 32).
    #[test]
    fn row_maxima_are_the_fold_s_and_ties_go_to_the_lowest_lane() {
        let specials = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -0.0, 0.0, 1e-40];
        for n in (0..100).chain([300, 301, 2048]) {
            for seed in 0..4u32 {
                let row: Vec<f32> = (0..n as u32)
                    .map(|i| {
                        let h = i.wrapping_mul(2_654_435_761).wrapping_add(seed * 97) >> 7;
                        match h % 11 {
                            0 if seed > 0 => specials[(h / 11) as usize % specials.len()],
                            _ => (h % 1000) as f32 / 7.0 - 70.0 - seed as f32 * 30.0,
                        }
                    })
                    .collect();
                let want = row.iter().fold(f32::NEG_INFINITY, |a, v| a.max(*v));
                let got = reduce_row(BinOp::Maximum, &row);
                assert!(got == want, "n {n}, seed {seed}: {got} against {want}");
            }
        }
        // Ties: -0 in lane 3 and +0 in lane 1 (element 33): lane 1's is kept, wherever it is.
        let mut row = vec![-1.0f32; 70];
        row[3] = -0.0;
        row[33] = 0.0;
        assert_eq!(reduce_row(BinOp::Maximum, &row).to_bits(), 0.0f32.to_bits());
        row[33] = -1.0;
        row[65] = 0.0;
        assert_eq!(reduce_row(BinOp::Maximum, &row).to_bits(), 0.0f32.to_bits());
        row[1] = -0.0;
        assert_eq!(
            reduce_row(BinOp::Maximum, &row).to_bits(),
            (-0.0f32).to_bits()
        );
    }

    #[test]
    fn half_sums_keep_the_documented_order_to_the_bit() {
        // A deterministic spread of magnitudes and signs (so the order shows in the bits),
        // with the special values among them in some rows.
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let mantissa = (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
            mantissa * 2f32.powi((state % 40) as i32 - 20)
        };
        for len in [0, 1, 2, 15, 16, 17, 31, 33, 100, 512, 515] {
            for special in [None, Some(f32::NAN), Some(f32::INFINITY), Some(-0.0)] {
                let mut row: Vec<f32> = (0..len).map(|_| next()).collect();
                if let (Some(v), true) = (special, len > 3) {
                    row[len / 3] = v;
                }
                let centre = [next(), next()];
                let square = |v: f32, m: f32| (v - m) * (v - m);
                for (fast, book) in [
                    (
                        half_sums(&row, centre, |v, _| v),
                        half_sums_by_the_book(&row, centre, |v, _| v),
                    ),
                    (
                        half_sums(&row, centre, square),
                        half_sums_by_the_book(&row, centre, square),
                    ),
                ] {
                    assert_eq!(
                        fast.map(f32::to_bits),
                        book.map(f32::to_bits),
                        "len {len}, {special:?}"
                    );
                }
            }
        }
    }
}
