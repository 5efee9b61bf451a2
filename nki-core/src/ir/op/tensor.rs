//! Tensor-engine instructions and MX quantisation: transposes and matrix multiplications.
//!
//! Declared here, expanded by [`super::instructions`]: each variant's operands (their roles)
//! and the NKI keyword(s) each field is spelled as.

/// Appends this family's variants to the declaration and hands it to the next family macro.
#[rustfmt::skip]
macro_rules! tensor_instructions {
    ([$next:ident $(, $rest:ident)*] $($acc:tt)*) => { $next! { [$($rest),*] $($acc)*

    /// Tensor engine: `dst = dataᵀ`, an SBUF `[P, F]` region into a PSUM `[F, P]` region.
    NcTranspose = "nc_transpose" {
        /// Destination `[F, P]` (PSUM on the tensor engine).
        write dst: TileRegion => dst,
        /// Source `[P, F]` (SBUF on the tensor engine).
        read data: TileRegion => data,
        /// The engine it runs on.
        param engine: TransposeEngine => engine,
    },
    /// Tensor engine: `dst (+)= stationaryᵀ · moving`, contraction over partitions (and in
    /// `double_row` mode over the two halves of each operand's free dims too).
    NcMatmul = "nc_matmul" {
        /// PSUM destination `[M, N]`.
        write dst: TileRegion => dst,
        /// `[K, M]` in SBUF.
        read stationary: TileRegion => stationary,
        /// `[K, N]` in SBUF.
        read moving: TileRegion => moving,
        /// `(start_row, start_column)` of the PE tile it runs on (empty: the whole array).
        param tile_position: Vec<usize> => tile_position,
        /// `(row_size, column_size)` of that PE tile (empty: the whole array).
        param tile_size: Vec<usize> => tile_size,
        /// Add into `dst` instead of overwriting it.
        param accumulate: bool => accumulate,
        /// Transpose mode (NeuronCore-v3+): products with a zero factor are exactly zero, so
        /// an identity `moving` moves `stationary`'s bits through, NaN, infinities and `-0.0`
        /// included. (On NeuronCore-v2 NKI's flag only marks the instruction for the profiler:
        /// it is recorded as an ordinary matmul there, this `false`.)
        param is_transpose: bool => is_transpose,
        /// The performance mode: in `double_row`, `stationary` and `moving` hold two halves of
        /// the contraction each (see [`MatmulPerfMode`](crate::ir::MatmulPerfMode)).
        #[serde(skip_serializing_if = "crate::ir::MatmulPerfMode::is_none")]
        param perf_mode: MatmulPerfMode => perf_mode,
    } reads dst when accumulate,
    /// Tensor engine: `dst (+)= Σ_k Σ_lane (stationary · 2^stationary_scale)ᵀ ·
    /// (moving · 2^moving_scale)`, contracting over the partitions and the four lanes of each
    /// packed element (MXFP8 / MXFP4 with their block scales), accumulated in fp32.
    NcMatmulMx = "nc_matmul_mx" {
        /// PSUM destination `[M, N]`, float32 or bfloat16.
        write dst: TileRegion => dst,
        /// Packed `[K, M]` in SBUF.
        read stationary: TileRegion => stationary,
        /// Packed `[K, N]` in SBUF.
        read moving: TileRegion => moving,
        /// `stationary`'s scales, laid out as `quantize_mx` writes them.
        read stationary_scale: TileRegion => stationary_scale,
        /// `moving`'s scales, laid out as `quantize_mx` writes them.
        read moving_scale: TileRegion => moving_scale,
        /// `(start_row, start_column)` of row tiling mode (empty: the whole array).
        param tile_position: Vec<usize> => tile_position,
        /// `(row_size, column_size)` of row tiling mode (empty: the whole array).
        param tile_size: Vec<usize> => tile_size,
        /// Add into `dst` instead of overwriting it.
        param accumulate: bool => accumulate,
    } reads dst when accumulate,
    /// Vector engine: MX quantisation of fp16/bf16 `src` `[P, 4F]` into packed fp8 `dst`
    /// `[P, F]` and one E8M0 scale per group of 8 partitions × 4 elements into `dst_scale`
    /// (group `g` of a column at row `32·(g/4) + g%4` of `dst_scale`; the other rows keep
    /// their values).
    QuantizeMx = "quantize_mx" {
        /// `float8_e5m2_x4` / `float8_e4m3fn_x4` destination, `src`'s partitions, a quarter of
        /// its free size.
        write dst: TileRegion => dst,
        /// float16 / bfloat16 input, in the MX layout (each 4 consecutive free elements are
        /// the 4 contraction values of one packed element).
        read src: TileRegion => src,
        /// The scales (float8_e8m0fnu or uint8), `dst`'s free size.
        write dst_scale: TileRegion => dst_scale,
    } keeps dst_scale,

    } };
}

pub(super) use tensor_instructions;
