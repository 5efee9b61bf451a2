//! The tensor engine's `nc_matmul` and `nc_transpose`.

use crate::ir::{MatmulPerfMode, Op, TileRegion, TransposeEngine};
use crate::lang::context::with_builder;
use crate::loc::SourceLoc;

/// `nisa.nc_matmul(dst, stationary, moving, accumulate=...)`: `dst (+)= stationaryᵀ · moving`
/// on the tensor engine, contracting over the partition dim: stationary `[K, M]`, moving
/// `[K, N]`, dst `[M, N]` in PSUM, on the whole 128 × 128 PE array.
#[track_caller]
pub fn nc_matmul(
    dst: impl Into<TileRegion>,
    stationary: impl Into<TileRegion>,
    moving: impl Into<TileRegion>,
    accumulate: bool,
) {
    nc_matmul_tiled(
        dst,
        (stationary, moving),
        MatmulTiling::default(),
        accumulate,
    );
}

/// [`nc_matmul`] on a tile of the PE array (NKI's tiling mode, `tile_position` / `tile_size`):
/// the same values; [`crate::validate`] checks the tiling (`matmul-tiling`). The cost model
/// charges it as a matmul of its size on the whole array: matmuls on disjoint PE tiles running
/// in parallel are not modelled.
#[track_caller]
pub fn nc_matmul_tiled(
    dst: impl Into<TileRegion>,
    (stationary, moving): (impl Into<TileRegion>, impl Into<TileRegion>),
    tiling: MatmulTiling,
    accumulate: bool,
) {
    let operands = (dst.into(), stationary.into(), moving.into());
    let mode = (false, MatmulPerfMode::None);
    record_nc_matmul(SourceLoc::caller(), operands, tiling, accumulate, mode);
}

/// [`nc_matmul_tiled`] in the tensor engine's double FP8 mode (NKI's
/// `perf_mode=nisa.matmul_perf_mode.double_row`, NeuronCore-v3 and newer): `stationary`
/// `[K/2, 2, M]` and `moving` `[K/2, 2, N]` (fp8) contract over their partitions and their most
/// major free dim of 2 into `dst` `[M, N]`, in the tensor-engine time of an ordinary matmul
/// over `K/2` partitions (the Trainium2 architecture guide). The values are those of the two
/// ordinary matmuls of the halves, the second accumulating into the first. Not with column
/// tiling (a `tile_size` column size under 128), as the `nc_matmul` docs say.
#[track_caller]
pub fn nc_matmul_double_row(
    dst: impl Into<TileRegion>,
    (stationary, moving): (impl Into<TileRegion>, impl Into<TileRegion>),
    tiling: MatmulTiling,
    accumulate: bool,
) {
    let operands = (dst.into(), stationary.into(), moving.into());
    let mode = (false, MatmulPerfMode::DoubleRow);
    record_nc_matmul(SourceLoc::caller(), operands, tiling, accumulate, mode);
}

/// [`nc_matmul_tiled`] in the tensor engine's transpose mode (NKI's `is_transpose=True`): on
/// NeuronCore-v3 and newer a product with a zero factor is exactly zero and a sum of one
/// product is that product, so `moving` an identity transposes `stationary` bit for bit (NaN,
/// infinities and `-0.0` included), where an ordinary matmul would spread a NaN or infinity
/// through its zero products. The NKI docs define the mode by that use (an identity `moving`)
/// and say no more; what any other `moving` gives is this rule, torch-nki's. On NeuronCore-v2
/// the flag only marks the instruction for the profiler, so there it records an ordinary
/// matmul (and codegen for Trn1 writes no flag).
#[track_caller]
pub fn nc_matmul_is_transpose(
    dst: impl Into<TileRegion>,
    (stationary, moving): (impl Into<TileRegion>, impl Into<TileRegion>),
    tiling: MatmulTiling,
    accumulate: bool,
) {
    let operands = (dst.into(), stationary.into(), moving.into());
    let mode = (true, MatmulPerfMode::None);
    record_nc_matmul(SourceLoc::caller(), operands, tiling, accumulate, mode);
}

fn record_nc_matmul(
    loc: SourceLoc,
    (dst, stationary, moving): (TileRegion, TileRegion, TileRegion),
    tiling: MatmulTiling,
    accumulate: bool,
    (is_transpose, perf_mode): (bool, MatmulPerfMode),
) {
    with_builder(|b| {
        let is_transpose = is_transpose && b.target.nc_version() >= nki_spec::NcVersion::Gen3;
        let (_, m, n) = perf_mode.dims(&stationary, &moving);
        let double_row = perf_mode == MatmulPerfMode::DoubleRow;
        let message = double_row_problem(b.target, perf_mode, &tiling)
            .or_else(|| {
                let operands = [("stationary", &stationary), ("moving", &moving)];
                let unpaired = operands
                    .into_iter()
                    .find(|(_, r)| double_row && MatmulPerfMode::double_row_halves(r).is_none());
                unpaired.map(|(name, _)| {
                    format!(
                        "nc_matmul: perf_mode=double_row takes {name} as [K/2, 2, free] (its \
                         most major free dim holds the two halves of the contraction)"
                    )
                })
            })
            .or_else(|| {
                let (k1, k2) = (stationary.np, moving.np);
                (k1 != k2).then(|| {
                    format!("nc_matmul: stationary has {k1} partitions (K) but moving has {k2}")
                })
            })
            .or_else(|| {
                (dst.shape() != [m, n]).then(|| {
                    format!(
                        "nc_matmul: dst has shape {:?} but stationaryᵀ·moving is [{m}, {n}]",
                        dst.shape()
                    )
                })
            })
            .or_else(|| tiling.given_whole("nc_matmul"));
        match message {
            Some(message) => b.fail(loc, message),
            None => {
                b.push_op(
                    Op::NcMatmul {
                        dst,
                        stationary,
                        moving,
                        tile_position: tiling.tile_position,
                        tile_size: tiling.tile_size,
                        accumulate,
                        is_transpose,
                        perf_mode,
                    },
                    loc,
                );
            }
        }
    });
}

/// Why `double_row` cannot run here (`None` for the ordinary mode or where it can): it needs
/// NeuronCore-v3 or newer and the whole PE array's columns.
fn double_row_problem(
    target: crate::target::Target,
    perf_mode: MatmulPerfMode,
    tiling: &MatmulTiling,
) -> Option<String> {
    if perf_mode != MatmulPerfMode::DoubleRow {
        return None;
    }
    if target.nc_version() < nki_spec::NcVersion::Gen3 {
        return Some(format!(
            "nc_matmul: perf_mode=double_row needs NeuronCore-v3 or newer, not {} ({})",
            target.name(),
            target.nc_version().name()
        ));
    }
    matches!(tiling.tile_size.as_slice(), [_, columns] if *columns < 128).then(|| {
        "nc_matmul: perf_mode=double_row cannot be combined with column tiling (a tile_size \
         column size under 128)"
            .into()
    })
}

/// The PE-array tile a matmul runs on: `tile_position` `(start_row, start_column)` and
/// `tile_size` `(row_size, column_size)`, both given or neither (the whole 128 × 128 array).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MatmulTiling {
    /// `(start_row, start_column)`, or empty.
    pub tile_position: Vec<usize>,
    /// `(row_size, column_size)`, or empty.
    pub tile_size: Vec<usize>,
}

impl MatmulTiling {
    /// `None` when both are two-element tuples or both are empty; else the trace error of
    /// instruction `inst`.
    pub(crate) fn given_whole(&self, inst: &str) -> Option<String> {
        let given = |v: &Vec<usize>| match v.len() {
            0 => Some(false),
            2 => Some(true),
            _ => None,
        };
        match (given(&self.tile_position), given(&self.tile_size)) {
            (Some(a), Some(b)) if a == b => None,
            _ => Some(format!(
                "{inst}: tile_position and tile_size are two-element tuples, both given or \
                 neither, got {:?} and {:?}",
                self.tile_position, self.tile_size
            )),
        }
    }
}

/// `nisa.nc_transpose(dst, data)` on the tensor engine: `dst = dataᵀ`, an SBUF `[P, F]` region
/// (`P, F ≤ 128`) into a PSUM `[F, P]` region (fp32, or bf16 on Trn3), exact for every dtype.
/// The usual way to turn a row-major tile into a stationary operand without a transposed DMA.
#[track_caller]
pub fn nc_transpose(dst: impl Into<TileRegion>, data: impl Into<TileRegion>) {
    nc_transpose_on(dst, data, TransposeEngine::Tensor);
}

/// [`nc_transpose`] on `engine`: the vector engine transposes up to 32 × 32 and reads and
/// writes SBUF or PSUM (checked by [`crate::validate`]); the values are the same.
#[track_caller]
pub fn nc_transpose_on(
    dst: impl Into<TileRegion>,
    data: impl Into<TileRegion>,
    engine: TransposeEngine,
) {
    let loc = SourceLoc::caller();
    let (dst, data) = (dst.into(), data.into());
    with_builder(|b| {
        let [p, f] = data.shape();
        if dst.shape() != [f, p] {
            b.fail(
                loc,
                format!(
                    "nc_transpose: dst has shape {:?} but the transpose of data {:?} is [{f}, {p}]",
                    dst.shape(),
                    data.shape()
                ),
            );
        } else {
            b.push_op(Op::NcTranspose { dst, data, engine }, loc);
        }
    });
}
