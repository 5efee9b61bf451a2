//! Selection and search: predicated and ranged selects, and the top-8 / top-k searches.
//!
//! Declared here, expanded by [`super::instructions`]: each variant's operands (their roles)
//! and the NKI keyword(s) each field is spelled as.

/// Appends this family's variants to the declaration and hands it to the next family macro.
#[rustfmt::skip]
macro_rules! select_instructions {
    ([$next:ident $(, $rest:ident)*] $($acc:tt)*) => { $next! { [$($rest),*] $($acc)*

    /// Vector engine: `dst[p, f] = on_true[p, f]` where `predicate[p, f]` is nonzero (zero with
    /// `reverse_pred`) and `on_false` (an immediate or a `(P, 1)` column) elsewhere, in fp32,
    /// rounded once to `dst`'s dtype; with `reduce_res`, each row's maximum of the fp32 results
    /// (NKI's `reduce_cmd=reset_reduce`, from −inf) into that `(P, 1)` column.
    SelectReduce = "select_reduce" {
        /// Destination, `on_true`'s shape.
        write dst: TileRegion => dst,
        /// The predicate, `on_true`'s shape (an integer tile).
        read predicate: TileRegion => predicate,
        /// The values selected where the predicate holds.
        read on_true: TileRegion => on_true,
        /// The value selected elsewhere: an immediate or a `(P, 1)` column.
        read on_false: ScalarOperand => on_false,
        /// Optional `(P, 1)` destination of each row's maximum.
        write reduce_res: Option<TileRegion> => (reduce_res, reduce_cmd) via reset_reduce,
        /// Select `on_true` where the predicate is zero instead.
        param reverse_pred: bool => reverse_pred,
    },
    /// Vector engine (NeuronCore-v3 and newer): `dst[p, f] = on_true[p, f]` where
    /// `i comp0 bound0[p]` and `i comp1 bound1[p]` for `i = f + range_start` (in fp32), and
    /// `on_false` elsewhere; optionally reducing each row of the result into `reduce_res`.
    RangeSelect = "range_select" {
        /// Destination, `on_true`'s shape.
        write dst: TileRegion => dst,
        /// The values selected where both comparisons hold.
        read on_true: TileRegion => on_true_tile,
        /// First comparison, of the index against `bound0`.
        param comp0: BinOp => comp_op0,
        /// `(P, 1)` fp32 column.
        read bound0: TileRegion => bound0,
        /// Second comparison, of the index against `bound1`.
        param comp1: BinOp => comp_op1,
        /// `(P, 1)` fp32 column.
        read bound1: TileRegion => bound1,
        /// Added to the free index before comparing.
        param range_start: f32 => range_start,
        /// The value written where either comparison fails.
        param on_false: f32 => on_false_value,
        /// Optional free-dim reduction of the result: operator and `(P, 1)` destination.
        write reduce: Option<(BinOp, TileRegion)>
            => (reduce_op, reduce_res, reduce_cmd) via reset_reduce,
    } explicit reduce_cmd & reduce_op & range_start,
    /// GpSimd engine: `dst[p, f] = on_true[p, f]` where `cmp(offset + channel_multiplier·p +
    /// step·f, 0)` holds (the affine value computed in int32, as [`Op::Iota`]'s, for partition
    /// `p` and free index `f` within the region) and `on_false` elsewhere (`nisa.affine_select`
    /// with a one-dimensional pattern `[[step, nf]]`).
    AffineSelect = "affine_select" {
        /// Destination, in SBUF.
        write dst: TileRegion => dst,
        /// Added per free element.
        param step: i32 => _,
        /// Added per partition.
        param channel_multiplier: i32 => channel_multiplier,
        /// The values selected where the comparison holds, `dst`'s shape, in SBUF.
        read on_true: TileRegion => on_true_tile,
        /// The value written where it does not.
        param on_false: f32 => on_false_value,
        /// The comparison of the affine value with 0.
        param cmp: BinOp => cmp_op,
        /// The affine value at `[0, 0]`.
        param offset: i32 => offset,
    } explicit cmp_op & offset,
    /// Vector engine: the eight largest values of each partition of `src`, in descending order
    /// (NaN above everything, ties in row order), into the `(P, 8)` `dst`.
    Max8 = "max8" {
        /// Destination, `(P, 8)`.
        write dst: TileRegion => dst,
        /// Input, 8 to 16384 elements per partition.
        read src: TileRegion => src,
    },
    /// Vector engine: for each of the eight values of `vals`' partition, the index in `data`'s
    /// partition of its first occurrence (the k-th occurrence for its k-th repetition in `vals`),
    /// or −1 (uint32's all-ones bits read as int32) where there is none, into the int32 `(P, 8)`
    /// `dst`.
    NcFindIndex8 = "nc_find_index8" {
        /// Destination, `(P, 8)` int32.
        write dst: TileRegion => dst,
        /// Searched, 8 to 16384 elements per partition.
        read data: TileRegion => data,
        /// The `(P, 8)` values.
        read vals: TileRegion => vals,
    },
    /// Vector engine: `dst = data` with the first not yet replaced occurrence of each of the
    /// eight values of `vals` (taken from the last to the first) replaced by `imm`; where each
    /// was found (or −1) into the int32 `(P, 8)` `dst_idx`, when given.
    NcMatchReplace8 = "nc_match_replace8" {
        /// Destination, `data`'s shape.
        write dst: TileRegion => dst,
        /// Searched, 8 to 16384 elements per partition.
        read data: TileRegion => data,
        /// The `(P, 8)` values.
        read vals: TileRegion => vals,
        /// The replacement.
        param imm: f32 => imm,
        /// Optional `(P, 8)` int32 destination of the matched indices.
        write dst_idx: Option<TileRegion> => dst_idx,
    },
    /// GpSimd engine: in every group of 16 partitions, the `K` (`val_dst`'s free size) largest
    /// of the `n` bf16 values laid out as a snake (element `e` at partition `e % 16`, column
    /// `e / 16`), in ascending order, and their snake indices (uint32), written as the same
    /// snake into `val_dst` and `idx_dst`; their other elements keep their values.
    Topk = "topk" {
        /// Destination of the values, bf16, `[P, K]`, in SBUF.
        write val_dst: TileRegion => val_dst,
        /// Destination of the indices, uint32, `[P, K]`, in SBUF.
        write idx_dst: TileRegion => idx_dst,
        /// The snakes, bf16, in SBUF.
        read src: TileRegion => src,
        /// Elements in each snake.
        param n: usize => n,
    } keeps val_dst & idx_dst,

    } };
}

pub(super) use select_instructions;
