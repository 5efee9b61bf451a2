//! DMA instructions: copies, transposes and reductions between HBM and on-chip memory.
//!
//! Declared here, expanded by [`super::instructions`]: each variant's operands (their roles)
//! and the NKI keyword(s) each field is spelled as.

/// Appends this family's variants to the declaration and hands it to the next family macro.
#[rustfmt::skip]
macro_rules! dma_instructions {
    ([$next:ident $(, $rest:ident)*] $($acc:tt)*) => { $next! { [$($rest),*] $($acc)*

    /// DMA between HBM and SBUF.
    DmaCopy = "dma_copy" {
        /// Destination.
        write dst: DmaOperand => dst,
        /// Source.
        read src: DmaOperand => src,
        /// What a row whose runtime offset falls outside its tensor does: a simulation error,
        /// or that row's transfer skipped.
        param oob_mode: OobMode => oob_mode,
        /// A copy that keeps a dtype view in step with the memory it views (NKI's
        /// `.view(dtype)` / `.ap(dtype=...)`): `src`'s bytes are read as `dst`'s dtype, each
        /// row the same bytes on both sides. On the device the view *is* that memory, so the
        /// device runs nothing: the cost model charges it nothing. Codegen spells it as a copy
        /// of `src.view(dtype)`, which NKI runs as a real copy.
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        param reinterpret: bool => _,
    },
    /// DMA engines (NeuronCore-v3 and newer): `dst` = `src` transposed. `src` has the shape
    /// `dims` (2 to 4 dims: `[a, b]`, `[a, b, c]` or `[a, b, c, d]`, the first its rows and the
    /// others merged, row-major, into its free run); `dst` is that shape permuted by
    /// `(1, 0)`, `(2, 1, 0)` or `(3, 1, 2, 0)` (its first permuted dim the partitions, the
    /// others its free run). Values pass through unconverted (one dtype on both sides).
    DmaTranspose = "dma_transpose" {
        /// SBUF destination, the permuted shape.
        write dst: TileRegion => dst,
        /// HBM or SBUF source, `[dims[0], product of the other dims]`.
        read src: DmaOperand => src,
        /// The source's dims.
        param dims: Vec<usize> => _,
        /// DMA queue priority 0..=3, lower first (NeuronCore-v4 and newer).
        param priority: Option<u8> => priority,
        /// How the descriptors are generated.
        param dge_mode: DgeMode => dge_mode,
        /// What an out-of-bounds indirect index does.
        param oob_mode: OobMode => oob_mode,
    },
    /// DMA engines: `dst = srcs[0]·scales[0] + srcs[1]·scales[1] + ...` element by element (the
    /// `k`-th element of each operand in row-major order: partitions, then free elements), in
    /// fp32, rounded once to `dst`'s dtype. Every element of every source is read before `dst`
    /// is written.
    DmaCompute = "dma_compute" {
        /// Destination, HBM or SBUF.
        write dst: DmaOperand => dst,
        /// The sources (1 to 16), HBM or SBUF, each `dst`'s element count.
        read srcs: Vec<DmaOperand> => srcs,
        /// How the scaled sources combine (`nl.add`).
        param reduce_op: BinOp => reduce_op,
        /// One factor per source (NKI's `scales`; `None` is all 1.0).
        param scales: Vec<f32> => scales via unit_scales,
        /// Whether scatter indices are unique (indirect accesses only).
        param unique_indices: bool => unique_indices,
        /// What an out-of-bounds indirect index does.
        param oob_mode: OobMode => oob_mode,
    },

    } };
}

pub(super) use dma_instructions;
