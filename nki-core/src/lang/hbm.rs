//! HBM tensor handles and their zero-copy views (slices, broadcasts, reshapes, transposes).

use crate::affine::AffineExpr;
use crate::dtype::DType;
use crate::ir::{
    DynamicOffset, HbmAccess, HbmDecl, HbmId, HbmKind, IndexDomain, RegisterId, TileRegion,
};
use crate::lang::context::with_builder;
use crate::loc::SourceLoc;

/// A tensor in device memory (`nl.shared_hbm`): a kernel input, or an output the kernel allocated.
#[derive(Clone, Debug, PartialEq)]
pub struct Hbm {
    id: HbmId,
    shape: Vec<usize>,
    dtype: DType,
}

impl Hbm {
    pub(crate) fn new(id: HbmId, shape: Vec<usize>, dtype: DType) -> Hbm {
        Hbm { id, shape, dtype }
    }

    /// The tensor's id in the program.
    pub fn id(&self) -> HbmId {
        self.id
    }

    /// Shape, outermost first.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Size of dimension `d`.
    pub fn dim(&self, d: usize) -> usize {
        self.shape[d]
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// Declares that this integer input holds indices in `range`, or `except` (an
    /// `ignore_index`). The simulator checks the data before running and rejects a call whose
    /// input holds anything else (an `IndexError` in Python), the way ATen rejects a class
    /// target out of range; on the device the kernel would read the wrong element instead.
    #[track_caller]
    pub fn require_indices(&self, range: std::ops::Range<i64>, except: Option<i64>) {
        let loc = SourceLoc::caller();
        with_builder(|b| {
            let decl = &mut b.hbm[self.id.0 as usize];
            if decl.kind != HbmKind::Input || decl.dtype != DType::I32 {
                let what = format!("{} {}", decl.dtype, decl.name);
                b.fail(
                    loc,
                    format!("require_indices needs an i32 kernel input, not {what}"),
                );
                return;
            }
            decl.domain = Some(IndexDomain {
                lo: range.start,
                hi: range.end,
                except,
                loc,
            });
        });
    }

    /// The whole tensor as a view.
    pub fn view(&self) -> HbmView {
        let mut dims = Vec::with_capacity(self.shape.len());
        let mut stride = 1i64;
        for &s in self.shape.iter().rev() {
            dims.push(ViewDim { size: s, stride });
            stride *= s as i64;
        }
        dims.reverse();
        HbmView {
            tensor: self.id,
            dtype: self.dtype,
            offset: AffineExpr::constant(0),
            dims,
            dynamic: None,
        }
    }

    /// An arbitrary strided view: element `[i0, i1, ...]` is flat element
    /// `offset + Σ ik·dims[k].stride` (NKI's `tensor.ap(pattern=..., offset=...)`). Unlike
    /// slices, the range is not checked here; validation bounds-checks every access.
    pub fn strided_view(&self, offset: AffineExpr, dims: Vec<ViewDim>) -> HbmView {
        HbmView {
            tensor: self.id,
            dtype: self.dtype,
            offset,
            dims,
            dynamic: None,
        }
    }

    /// Rows `start..start+n` of dimension 0.
    #[track_caller]
    pub fn rows(&self, start: impl Into<AffineExpr>, n: usize) -> HbmView {
        self.view().slice(0, start, n)
    }

    /// Columns `start..start+n` of dimension 1.
    #[track_caller]
    pub fn cols(&self, start: impl Into<AffineExpr>, n: usize) -> HbmView {
        self.view().slice(1, start, n)
    }

    /// The tensor reinterpreted with another shape of the same element count.
    #[track_caller]
    pub fn reshape(&self, shape: &[usize]) -> HbmView {
        self.view().reshape(shape)
    }
}

/// Allocates an output tensor in `nl.shared_hbm`. Return it from the kernel. In a grid traced
/// instance by instance, the instances after the first get the first one's tensor back (see
/// [`crate::lang::instances`]).
#[track_caller]
pub fn shared_hbm(shape: &[usize], dtype: DType) -> Hbm {
    let loc = SourceLoc::caller();
    if let Some(id) = with_builder(|b| b.first_instance_hbm(shape, dtype, loc)) {
        return Hbm::new(id, shape.to_vec(), dtype);
    }
    let hbm = allocate(HbmKind::Output, "out", shape, dtype, loc);
    with_builder(|b| b.note_instance_hbm(hbm.id()));
    hbm
}

/// A `shared_hbm` output of the whole launch allocated by whichever program instance asks
/// first: not one of the tensors every instance allocates alike (the copy a kernel argument
/// gets when one instance first writes it, which the others may never do).
pub(crate) fn launch_hbm(shape: &[usize], dtype: DType, loc: SourceLoc) -> Hbm {
    allocate(HbmKind::Output, "out", shape, dtype, loc)
}

/// Allocates scratch device memory private to the program (`nl.private_hbm`, alias `nl.hbm`):
/// the kernel may store to it and load from it, but cannot return it. Each call starts it
/// zeroed in the simulator (on the device its contents are undefined until written).
#[track_caller]
pub fn private_hbm(shape: &[usize], dtype: DType) -> Hbm {
    allocate(
        HbmKind::PrivateScratch,
        "scratch",
        shape,
        dtype,
        SourceLoc::caller(),
    )
}

/// A tensor of `kind` the kernel allocates at `loc`, named `{prefix}{n}` for the `n`-th of its
/// kind.
fn allocate(kind: HbmKind, prefix: &str, shape: &[usize], dtype: DType, loc: SourceLoc) -> Hbm {
    let id = with_builder(|b| {
        let n = b.hbm.iter().filter(|d| d.kind == kind).count();
        b.add_hbm(HbmDecl {
            name: format!("{prefix}{n}"),
            kind,
            shape: shape.to_vec(),
            dtype,
            loc: Some(loc),
            domain: None,
            values: None,
        })
    });
    Hbm::new(id, shape.to_vec(), dtype)
}

/// `nl.shared_constant`: a read-only tensor in shared HBM holding `values` (row-major, one per
/// element, rounded to `dtype` as a write to it would be), carried by the program. A count of
/// values other than the shape's is a trace error.
#[track_caller]
pub fn shared_constant(shape: &[usize], dtype: DType, values: &[f32]) -> Hbm {
    let loc = SourceLoc::caller();
    let id = with_builder(|b| {
        if let Some(id) = b.first_instance_hbm(shape, dtype, loc) {
            return id;
        }
        let numel: usize = shape.iter().product();
        if values.len() != numel {
            b.fail(
                loc,
                format!(
                    "shared_constant: {} values for shape {shape:?} ({numel} elements)",
                    values.len()
                ),
            );
        }
        let mut bytes = vec![0; numel * dtype.size_bytes()];
        for (i, v) in values.iter().take(numel).enumerate() {
            dtype.write(&mut bytes, i, *v);
        }
        let n = b.hbm.iter().filter(|d| d.kind == HbmKind::Constant).count();
        let id = b.add_hbm(HbmDecl {
            name: format!("const{n}"),
            kind: HbmKind::Constant,
            shape: shape.to_vec(),
            dtype,
            loc: Some(loc),
            domain: None,
            values: Some(bytes),
        });
        b.note_instance_hbm(id);
        id
    });
    Hbm::new(id, shape.to_vec(), dtype)
}

/// One dimension of a view: its size and its stride in elements (0 = broadcast).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ViewDim {
    /// Number of elements along the dimension.
    pub size: usize,
    /// Elements between neighbours along it.
    pub stride: i64,
}

/// A strided, possibly symbolic window onto an HBM tensor. Views never copy: they become the
/// access pattern of a `dma_copy`.
#[derive(Clone, Debug, PartialEq)]
pub struct HbmView {
    tensor: HbmId,
    dtype: DType,
    offset: AffineExpr,
    dims: Vec<ViewDim>,
    dynamic: Option<DynamicOffset>,
}

impl HbmView {
    /// The view's shape.
    pub fn shape(&self) -> Vec<usize> {
        self.dims.iter().map(|d| d.size).collect()
    }

    /// Element type of the underlying tensor.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    fn poisoned(mut self) -> HbmView {
        // After an error the trace goes on with a harmless view; the error is reported at the end.
        self.dims.iter_mut().for_each(|d| d.size = d.size.min(1));
        self
    }

    /// Elements `start..start+n` of dimension `dim`. The range is checked against the view for
    /// every value the loop indices in `start` can take.
    #[track_caller]
    pub fn slice(mut self, dim: usize, start: impl Into<AffineExpr>, n: usize) -> HbmView {
        let loc = SourceLoc::caller();
        let start = start.into();
        let Some(d) = self.dims.get(dim).copied() else {
            let rank = self.dims.len();
            with_builder(|b| {
                b.fail(
                    loc,
                    format!("slice of dimension {dim} of a rank-{rank} view"),
                )
            });
            return self.poisoned();
        };
        let (lo, hi) = with_builder(|b| start.range(&b.trips()));
        if lo < 0 || hi + n as i64 > d.size as i64 {
            with_builder(|b| {
                b.fail(
                    loc,
                    format!(
                        "out-of-bounds HBM slice: dimension {dim} has size {}, but the slice [{start}, {start} + {n}) reaches [{lo}, {})",
                        d.size,
                        hi + n as i64
                    ),
                )
            });
            return self.poisoned();
        }
        self.offset = self.offset + start.scaled(d.stride);
        self.dims[dim].size = n;
        self
    }

    /// Rows `start..start+n` of dimension 0.
    #[track_caller]
    pub fn rows(self, start: impl Into<AffineExpr>, n: usize) -> HbmView {
        self.slice(0, start, n)
    }

    /// Columns `start..start+n` of dimension 1.
    #[track_caller]
    pub fn cols(self, start: impl Into<AffineExpr>, n: usize) -> HbmView {
        self.slice(1, start, n)
    }

    /// NumPy-style broadcast: leading dimensions are added and size-1 dimensions stretched, all
    /// with stride 0 (e.g. a `[D]` weight viewed as `[128, D]`).
    #[track_caller]
    pub fn broadcast_to(mut self, shape: &[usize]) -> HbmView {
        let loc = SourceLoc::caller();
        if shape.len() < self.dims.len() {
            with_builder(|b| {
                b.fail(
                    loc,
                    format!("cannot broadcast a {:?} view to {shape:?}", self.shape()),
                )
            });
            return self.poisoned();
        }
        let extra = shape.len() - self.dims.len();
        let mut dims = vec![ViewDim { size: 0, stride: 0 }; extra];
        dims.extend(self.dims.iter().copied());
        for (d, &want) in dims.iter_mut().zip(shape) {
            if d.size == want {
                continue;
            }
            if d.size <= 1 {
                *d = ViewDim {
                    size: want,
                    stride: 0,
                };
            } else {
                with_builder(|b| {
                    b.fail(
                        loc,
                        format!("cannot broadcast a {:?} view to {shape:?}", self.shape()),
                    )
                });
                return self.poisoned();
            }
        }
        self.dims = dims;
        self
    }

    /// Swaps the two dimensions of a 2-D view (a transposed access pattern for DMA).
    #[track_caller]
    pub fn t(mut self) -> HbmView {
        if self.dims.len() != 2 {
            let loc = SourceLoc::caller();
            with_builder(|b| {
                b.fail(
                    loc,
                    format!("t() needs a 2-D view, got shape {:?}", self.shape()),
                )
            });
            return self.poisoned();
        }
        self.dims.swap(0, 1);
        self
    }

    /// The view with another shape of the same element count; the view must be contiguous.
    #[track_caller]
    pub fn reshape(mut self, shape: &[usize]) -> HbmView {
        let loc = SourceLoc::caller();
        let numel: usize = self.dims.iter().map(|d| d.size).product();
        if shape.iter().product::<usize>() != numel || !self.is_contiguous() {
            with_builder(|b| {
                b.fail(
                    loc,
                    format!(
                        "cannot reshape a {:?} view (contiguous: {}) to {shape:?}",
                        self.shape(),
                        self.is_contiguous()
                    ),
                )
            });
            return self.poisoned();
        }
        let mut dims = Vec::with_capacity(shape.len());
        let mut stride = 1i64;
        for &s in shape.iter().rev() {
            dims.push(ViewDim { size: s, stride });
            stride *= s as i64;
        }
        dims.reverse();
        self.dims = dims;
        self
    }

    fn is_contiguous(&self) -> bool {
        let mut expect = 1i64;
        for d in self.dims.iter().rev() {
            if d.size != 1 && d.stride != expect {
                return false;
            }
            expect *= d.size as i64;
        }
        true
    }

    /// NKI's `scalar_offset=`: the whole view moved by the integer `index` (a `(1, 1)` tile
    /// region) holds when the DMA runs, times `scale` elements (the stride of the view's
    /// indirect dim).
    pub fn scalar_offset(mut self, index: impl Into<TileRegion>, scale: i64) -> HbmView {
        self.dynamic = Some(DynamicOffset::Scalar {
            index: index.into(),
            scale,
        });
        self
    }

    /// NKI's `scalar_offset=` with a register (`VirtualRegister`): the whole view moved by the
    /// register's value when the DMA runs, times `scale` elements.
    pub fn register_offset(mut self, reg: RegisterId, scale: i64) -> HbmView {
        self.dynamic = Some(DynamicOffset::Register { reg, scale });
        self
    }

    /// NKI's `vector_offset=` (indirect dim 0): row `r` of the view starts at its offset plus
    /// `index[r]·scale` elements, `index` a `(rows, 1)` tile region read when the DMA runs (the
    /// view's row step is not used).
    pub fn vector_offset(mut self, index: impl Into<TileRegion>, scale: i64) -> HbmView {
        self.dynamic = Some(DynamicOffset::Vector {
            index: index.into(),
            scale,
        });
        self
    }

    /// The access pattern a DMA uses: rank-1 views are one row; in higher-rank views dim 0 is
    /// the rows and the others are merged where one steps over the next exactly, the rest kept
    /// as the row's free walk ([`HbmAccess::free_dims`]).
    pub(crate) fn to_access(&self) -> Result<HbmAccess, String> {
        let (p, free) = match self.dims.split_first() {
            None => (ViewDim { size: 1, stride: 0 }, vec![]),
            Some((f, [])) => (ViewDim { size: 1, stride: 0 }, vec![*f]),
            Some((p, rest)) => (*p, rest.to_vec()),
        };
        // Merge inner dims into the one outside them where the outer steps over them exactly;
        // size-1 dims vanish.
        let mut merged: Vec<ViewDim> = Vec::with_capacity(free.len());
        for d in free.into_iter().filter(|d| d.size != 1) {
            match merged.last_mut() {
                Some(prev) if prev.stride == d.stride * d.size as i64 => {
                    *prev = ViewDim {
                        size: prev.size * d.size,
                        stride: d.stride,
                    };
                }
                _ => merged.push(d),
            }
        }
        let nf = merged.iter().map(|d| d.size).product();
        let (f_stride, free_dims) = match merged.as_slice() {
            [] => (1, None),
            [f] => (f.stride, None),
            dims => (0, Some(dims.iter().map(|d| (d.stride, d.size)).collect())),
        };
        Ok(HbmAccess {
            tensor: self.tensor,
            offset: self.offset.clone(),
            np: p.size,
            nf,
            p_stride: p.stride,
            f_stride,
            free_dims,
            dynamic: self.dynamic.clone().map(Box::new),
        })
    }
}

impl From<&Hbm> for HbmView {
    fn from(h: &Hbm) -> HbmView {
        h.view()
    }
}
