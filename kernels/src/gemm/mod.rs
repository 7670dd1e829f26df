//! f32 matrix multiplication for the conv / linear layers.
//!
//! The kernels are the project's own ([`kernel`]: AVX-512, AVX2+FMA or portable, chosen at run
//! time), inside a blocked, packed driver ([`blocked`]), always called single-threaded. Every
//! element of a product is one chain of fused multiply-adds in reduction order, so a result does
//! not depend on the vector path, the block sizes or the machine's caches: AVX-512, AVX2 and
//! portable machines compute bit-identical numbers.
//!
//! Parallelism is added here at one level only, over a *fixed* tiling of the problem, so results
//! never depend on the number of threads either:
//! * [`matmul_rows_par`] splits the rows of the output into tiles of at most [`ROW_TILE`] rows;
//! * [`matmul_tn_reduce_par`] splits a long reduction into chunks of [`REDUCE_CHUNK`] and adds the
//!   partial products in chunk order.

mod blocked;
mod kernel;
mod patches;
mod profile;
mod transpose;

use std::mem::MaybeUninit;
use std::sync::OnceLock;

use blocked::{OperandA, OperandB, Strided};
use ndarray::{s, Array2, ArrayView2, ArrayViewMut2, Axis};
pub use patches::{PatchGeometry, Patches};
use profile::profiled;
pub use profile::{profile, GemmProfile, OperandKind, ShapeTime};
use rayon::prelude::*;

use crate::error::{KernelError, Result};
use crate::VectorPath;

/// Columns per panel of a [`PackedB`].
pub const PANEL: usize = kernel::NR;

/// Rows of the output handled by one task in [`matmul_rows_par`].
pub const ROW_TILE: usize = 1024;

/// Length of one reduction chunk in [`matmul_tn_reduce_par`].
pub const REDUCE_CHUNK: usize = 4096;

/// The environment variable that sets the GEMMs' vector path (`avx512`, `avx2`, `portable`)
/// instead of the widest this CPU runs: results are the same on every path, so this is for
/// checking that, or for timing a narrower path.
pub const PATH_VAR: &str = "CPTSIM_VECTOR_PATH";

static PATH: OnceLock<VectorPath> = OnceLock::new();

/// The vector path every GEMM of this process runs on: the one [`choose_vector_path`] set, else
/// the widest this CPU has.
pub fn vector_path() -> VectorPath {
    *PATH.get_or_init(VectorPath::detect)
}

/// Sets the GEMMs' vector path from [`PATH_VAR`] when it is set and not empty (before any GEMM
/// runs) and returns the path in use. An unknown name, a path this CPU lacks, or a path other than the
/// one already in use is an error naming the variable.
pub fn choose_vector_path() -> Result<VectorPath> {
    let Some(value) = std::env::var_os(PATH_VAR).filter(|v| !v.is_empty()) else {
        return Ok(vector_path());
    };
    let bad = |msg: String| KernelError::Invalid {
        what: format!("{PATH_VAR}={}", value.to_string_lossy()),
        msg,
    };
    let names = || {
        VectorPath::runnable()
            .map(VectorPath::name)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let path = value
        .to_str()
        .and_then(VectorPath::from_name)
        .ok_or_else(|| {
            bad(format!(
                "expected one of avx512, avx2, portable (this CPU runs {})",
                names()
            ))
        })?;
    if !path.runs_here() {
        return Err(bad(format!(
            "this CPU does not run it (it runs {})",
            names()
        )));
    }
    let set = *PATH.get_or_init(|| path);
    if set != path {
        return Err(bad(format!("the GEMMs already run on {}", set.name())));
    }
    Ok(path)
}

/// Samples per conv work block: about [`ROW_TILE`] GEMM rows, at least one sample. Fixed by the
/// geometry (`rows_per_sample` output pixels per sample), so the blocking (and every sum) is the
/// same for any thread count.
pub fn block_samples(rows_per_sample: usize) -> usize {
    (ROW_TILE / rows_per_sample.max(1)).max(1)
}

fn check(c: &ArrayViewMut2<f32>, a: &ArrayView2<f32>, b: &ArrayView2<f32>) -> Result<()> {
    let (m, k) = a.dim();
    let (k2, n) = b.dim();
    if k != k2 || c.dim() != (m, n) {
        return Err(KernelError::shape(
            "gemm",
            format!(
                "C{:?} = A{:?} · B{:?} does not conform",
                c.dim(),
                a.dim(),
                b.dim()
            ),
        ));
    }
    Ok(())
}

/// `C = A·B` (or `C += A·B` when `accumulate`), single-threaded. Any strides are accepted.
///
/// Each element is `c ← fma(a[i,p], b[p,j], c)` over `p` in order, starting from `0` (or from
/// `C`'s value when `accumulate`), on every vector path.
pub fn matmul_into(
    c: ArrayViewMut2<f32>,
    a: ArrayView2<f32>,
    b: ArrayView2<f32>,
    accumulate: bool,
) -> Result<()> {
    strided_into(c, a, b, accumulate, OperandKind::Strided)
}

/// [`matmul_into`] for one of the 16 products of a Winograd conv's weight gradient (profiled
/// as [`OperandKind::Winograd`]).
pub fn matmul_winograd_into(
    c: ArrayViewMut2<f32>,
    a: ArrayView2<f32>,
    b: ArrayView2<f32>,
    accumulate: bool,
) -> Result<()> {
    strided_into(c, a, b, accumulate, OperandKind::Winograd)
}

/// [`matmul_into`], profiled as `kind`.
fn strided_into(
    mut c: ArrayViewMut2<f32>,
    a: ArrayView2<f32>,
    b: ArrayView2<f32>,
    accumulate: bool,
    kind: OperandKind,
) -> Result<()> {
    check(&c, &a, &b)?;
    let (m, k) = a.dim();
    let n = b.ncols();
    if m == 0 || n == 0 {
        return Ok(());
    }
    if k == 0 {
        if !accumulate {
            c.fill(0.0);
        }
        return Ok(());
    }
    // SAFETY: the shapes conform and are non-empty (checked above), the views describe valid
    // elements, and `c` is a unique borrow, so it aliases neither `a` nor `b`.
    profiled((m, k, n), kind, || unsafe {
        product(vector_path(), strided_mut(&mut c), a, b, accumulate)
    });
    Ok(())
}

/// `C = A·B` written into the uninitialised row-major `c` (`A`'s rows × `B`'s columns values),
/// single-threaded; returns `c`, now initialised. The arithmetic of [`matmul_into`] without
/// `accumulate`, minus the zeroing a fresh output would otherwise need.
pub fn matmul_uninit<'c, 'b>(
    c: &'c mut [MaybeUninit<f32>],
    a: ArrayView2<f32>,
    b: impl Into<B<'b>>,
) -> Result<&'c mut [f32]> {
    uninit_strided(c, a, b.into(), OperandKind::Strided)
}

/// [`matmul_uninit`] for one of a Winograd conv's 16 products (profiled as
/// [`OperandKind::Winograd`]).
pub fn matmul_winograd_uninit<'c, 'b>(
    c: &'c mut [MaybeUninit<f32>],
    a: ArrayView2<f32>,
    b: impl Into<B<'b>>,
) -> Result<&'c mut [f32]> {
    uninit_strided(c, a, b.into(), OperandKind::Winograd)
}

/// [`matmul_uninit`], profiled as `kind`.
fn uninit_strided<'c>(
    c: &'c mut [MaybeUninit<f32>],
    a: ArrayView2<f32>,
    b: B<'_>,
    kind: OperandKind,
) -> Result<&'c mut [f32]> {
    let a_dim = a.dim();
    let a = OperandA::Strided(Strided::new(a.as_ptr(), a.strides()));
    // SAFETY: `a` is the valid matrix of the view, of `a_dim`.
    unsafe { uninit_product(c, a, a_dim, b, kind) }
}

/// [`matmul_uninit`] with the im2col matrix of a convolution as `A`, read in place from its
/// padded input: the same numbers as gathering the patches first, without the copy.
pub fn matmul_patches_uninit<'c, 'b>(
    c: &'c mut [MaybeUninit<f32>],
    a: &Patches<'_>,
    b: impl Into<B<'b>>,
) -> Result<&'c mut [f32]> {
    let b = b.into();
    // SAFETY: `Patches::new` checked that every term of its rows is in its input.
    unsafe { uninit_product(c, OperandA::Patches(a), a.dim(), b, OperandKind::Patches) }
}

/// [`matmul_uninit`] with the transposed im2col matrix of a convolution as `A` (a row per term,
/// a column per output pixel), read in place: `C[terms, n] = Pᵀ·B` for a `B` of one row per
/// output pixel (a conv's weight gradient, transposed).
pub fn matmul_patches_t_uninit<'c>(
    c: &'c mut [MaybeUninit<f32>],
    a: &Patches<'_>,
    b: ArrayView2<f32>,
) -> Result<&'c mut [f32]> {
    let (rows, terms) = a.dim();
    // SAFETY: `Patches::new` checked that every term of its rows is in its input.
    unsafe {
        uninit_product(
            c,
            OperandA::PatchesT(a),
            (terms, rows),
            B::View(b),
            OperandKind::PatchesT,
        )
    }
}

/// The body of [`matmul_uninit`] for any `A`.
///
/// # Safety
/// `a` describes a valid matrix of `a_dim` (rows, terms).
unsafe fn uninit_product<'c>(
    c: &'c mut [MaybeUninit<f32>],
    a: OperandA<'_>,
    (m, k): (usize, usize),
    b: B<'_>,
    kind: OperandKind,
) -> Result<&'c mut [f32]> {
    let (k2, n) = b.dim();
    if k != k2 || Some(c.len()) != m.checked_mul(n) {
        return Err(KernelError::shape(
            "gemm",
            format!(
                "{} outputs = A{:?} · B{:?} does not conform",
                c.len(),
                (m, k),
                b.dim()
            ),
        ));
    }
    if k == 0 {
        c.fill(MaybeUninit::new(0.0));
    } else if m * n > 0 {
        let c = Strided::new(c.as_mut_ptr().cast::<f32>(), &[n as isize, 1]);
        let b = b.operand();
        // SAFETY: the shapes conform and are non-empty, `a` is valid (caller's contract), `c`
        // holds the `m × n` row-major values (exclusively borrowed), and without `accumulate`
        // the driver writes every element of `C` before it reads any (later reduction blocks
        // continue from the first one's values).
        profiled((m, k, n), kind, || unsafe {
            blocked::gemm(vector_path(), (m, n, k), a, b, c, false)
        });
    }
    // SAFETY: every element was written above (`MaybeUninit<f32>` has the layout of `f32`).
    Ok(unsafe { &mut *(std::ptr::from_mut(c) as *mut [f32]) })
}

/// `B` of a product with a fresh output: a view, or a matrix packed once for many products.
#[derive(Clone, Copy)]
pub enum B<'b> {
    /// Any strided matrix, cut into panels by each product.
    View(ArrayView2<'b, f32>),
    /// A matrix already in the panels' layout.
    Packed(&'b PackedB),
}

impl<'b> From<ArrayView2<'b, f32>> for B<'b> {
    fn from(v: ArrayView2<'b, f32>) -> Self {
        B::View(v)
    }
}

impl<'b> From<&'b PackedB> for B<'b> {
    fn from(p: &'b PackedB) -> Self {
        B::Packed(p)
    }
}

impl B<'_> {
    /// `(rows, columns)`.
    fn dim(&self) -> (usize, usize) {
        match self {
            B::View(v) => v.dim(),
            B::Packed(p) => (p.k, p.n),
        }
    }

    /// The driver's operand.
    fn operand(&self) -> OperandB {
        match self {
            B::View(v) => OperandB::Strided(Strided::new(v.as_ptr(), v.strides())),
            B::Packed(p) => OperandB::Packed {
                ptr: p.data.as_ptr(),
                k: p.k,
            },
        }
    }
}

/// A `k × n` matrix stored as the kernels read `B`: panels of `NR` (16) columns one after
/// another, each `k` rows of `NR` adjacent values (zero beyond the last column). A conv packs
/// its weights once per pass instead of once per block of output rows; the products read the
/// same values, so the numbers do not change.
pub struct PackedB {
    data: Vec<f32>,
    k: usize,
    n: usize,
}

impl PackedB {
    /// Packs `b`.
    pub fn new(b: ArrayView2<f32>) -> Self {
        let (k, n) = b.dim();
        // SAFETY: the view describes a valid `k × n` matrix.
        let data =
            unsafe { blocked::pack(vector_path(), Strided::new(b.as_ptr(), b.strides()), (k, n)) };
        Self { data, k, n }
    }

    /// The `k × n` matrix whose panels are `data`, laid out as [`PackedB`] holds them: panels of
    /// [`PANEL`] columns one after another, each `k` rows of `PANEL` values, zero beyond column
    /// `n`. Errors when `data` is not that long.
    pub fn from_panels(data: Vec<f32>, k: usize, n: usize) -> Result<Self> {
        if Some(data.len())
            != n.div_ceil(PANEL)
                .checked_mul(k)
                .and_then(|v| v.checked_mul(PANEL))
        {
            return Err(KernelError::shape(
                "gemm",
                format!(
                    "{} values are not the panels of a {k} × {n} matrix",
                    data.len()
                ),
            ));
        }
        Ok(Self { data, k, n })
    }

    /// `(rows, columns)` of the matrix.
    pub fn dim(&self) -> (usize, usize) {
        (self.k, self.n)
    }
}

/// [`blocked::gemm`] with `A` and `B` as ndarray views.
///
/// # Safety
/// `path` runs on this CPU; `c` describes `A`'s rows × `B`'s columns writable elements that
/// alias neither `A` nor `B`, and the shapes conform and are non-empty.
unsafe fn product(
    path: VectorPath,
    c: Strided<*mut f32>,
    a: ArrayView2<f32>,
    b: ArrayView2<f32>,
    accumulate: bool,
) {
    let (m, k) = a.dim();
    let n = b.ncols();
    debug_assert!(b.nrows() == k && m * n * k > 0);
    let (a, b) = (
        Strided::new(a.as_ptr(), a.strides()),
        Strided::new(b.as_ptr(), b.strides()),
    );
    // SAFETY: forwarded from the caller.
    unsafe {
        blocked::gemm(
            path,
            (m, n, k),
            OperandA::Strided(a),
            OperandB::Strided(b),
            c,
            accumulate,
        )
    }
}

/// `c` as the driver's strided pointer.
fn strided_mut(c: &mut ArrayViewMut2<f32>) -> Strided<*mut f32> {
    let cs = [c.strides()[0], c.strides()[1]];
    Strided::new(c.as_mut_ptr(), &cs)
}

/// `C = A·B` (or `C += A·B`), with the rows of `C` split into tiles of [`ROW_TILE`] rows computed
/// in parallel on the rayon pool; on more than one thread, a product with fewer than two tiles per
/// thread takes smaller tiles (multiples of 24 rows, two per thread) so that every thread gets
/// work — a language model's linear layers have a few hundred to a thousand rows. Every element
/// is one chain whatever the tile, so the result does not depend on the thread count.
pub fn matmul_rows_par(
    mut c: ArrayViewMut2<f32>,
    a: ArrayView2<f32>,
    b: ArrayView2<f32>,
    accumulate: bool,
) -> Result<()> {
    check(&c, &a, &b)?;
    let tile = row_tile(a.nrows());
    if a.nrows() <= tile {
        return matmul_into(c, a, b, accumulate);
    }
    let tiles: Vec<_> = c
        .axis_chunks_iter_mut(Axis(0), tile)
        .zip(a.axis_chunks_iter(Axis(0), tile))
        .collect();
    tiles
        .into_par_iter()
        .try_for_each(|(ct, at)| matmul_into(ct, at, b, accumulate))
}

/// Rows per task of [`matmul_rows_par`] for `rows` rows of output (its doc): at most
/// [`ROW_TILE`], the tiles of a longer product of about equal size (1040 rows, a ViT's 16 × 65
/// tokens, as 528 + 512 rather than 1024 + a 16-row tile that runs at a third of the peak).
fn row_tile(rows: usize) -> usize {
    let threads = rayon::current_num_threads();
    let even = rows
        .div_ceil(rows.div_ceil(ROW_TILE).max(1))
        .next_multiple_of(24);
    let tile = ROW_TILE.min(even);
    if threads > 1 {
        tile.min(rows.div_ceil(2 * threads).next_multiple_of(24))
    } else {
        tile
    }
}

/// [`matmul_rows_par`] without `accumulate`, into the uninitialised row-major `c` (`A`'s rows ×
/// `B`'s columns values), as [`matmul_uninit`] does single-threaded; returns `c`, now
/// initialised. The same tiles, so the same numbers for any thread count.
pub fn matmul_rows_par_uninit<'c>(
    c: &'c mut [MaybeUninit<f32>],
    a: ArrayView2<f32>,
    b: ArrayView2<f32>,
) -> Result<&'c mut [f32]> {
    let (m, n) = (a.nrows(), b.ncols());
    let tile = row_tile(m);
    if m <= tile || n == 0 || Some(c.len()) != m.checked_mul(n) {
        return matmul_uninit(c, a, b);
    }
    // `B` packed once for all the tiles instead of once per tile (the same values read).
    let packed = PackedB::new(b);
    let tiles: Vec<_> = c
        .chunks_mut(tile * n)
        .zip(a.axis_chunks_iter(Axis(0), tile))
        .collect();
    tiles
        .into_par_iter()
        .try_for_each(|(ct, at)| matmul_uninit(ct, at, &packed).map(drop))?;
    // SAFETY: every tile was written by its product (each initialises all of its output or
    // errors, and an error returned above); `MaybeUninit<f32>` has the layout of `f32`.
    Ok(unsafe { &mut *(std::ptr::from_mut(c) as *mut [f32]) })
}

/// `C = Aᵀ·B` (or `C += Aᵀ·B`) where `A` is `[k, m]` and `B` is `[k, n]` with a long `k`
/// (the weight-gradient GEMM: `k` = batch × output pixels). The reduction is split into chunks of
/// [`REDUCE_CHUNK`] rows computed in parallel; partial sums are added in chunk order, so the result
/// is independent of the thread count.
pub fn matmul_tn_reduce_par(
    c: ArrayViewMut2<f32>,
    a: ArrayView2<f32>,
    b: ArrayView2<f32>,
    accumulate: bool,
) -> Result<()> {
    if a.nrows() != b.nrows() {
        return Err(KernelError::shape(
            "gemm",
            format!(
                "Aᵀ·B with A{:?}, B{:?}: row counts differ",
                a.dim(),
                b.dim()
            ),
        ));
    }
    if a.nrows() <= REDUCE_CHUNK {
        return matmul_into(c, a.t(), b, accumulate);
    }
    let (m, n) = (a.ncols(), b.ncols());
    let chunks: Vec<_> = a
        .axis_chunks_iter(Axis(0), REDUCE_CHUNK)
        .zip(b.axis_chunks_iter(Axis(0), REDUCE_CHUNK))
        .collect();
    let partials: Vec<Array2<f32>> = chunks
        .into_par_iter()
        .map(|(ac, bc)| {
            let mut p = Array2::<f32>::zeros((m, n));
            matmul_into(p.view_mut(), ac.t(), bc, false).map(|()| p)
        })
        .collect::<Result<_>>()?;
    add_partials(c, &partials, accumulate)
}

/// Floats of `C` per task of [`add_partials`].
const PARTIALS_CHUNK: usize = 1 << 14;

/// `C = Σ partials` (or `C += Σ partials` when `accumulate`): each element summed in the
/// partials' order, from `0` (or from `C`), so the result does not depend on the thread count;
/// parallel over blocks of rows of `C`.
pub fn add_partials(
    mut c: ArrayViewMut2<f32>,
    partials: &[Array2<f32>],
    accumulate: bool,
) -> Result<()> {
    if let Some(p) = partials.iter().find(|p| p.dim() != c.dim()) {
        return Err(KernelError::shape(
            "gemm",
            format!("C{:?} for partial sums of shape {:?}", c.dim(), p.dim()),
        ));
    }
    let rows = (PARTIALS_CHUNK / c.ncols().max(1)).max(1);
    let blocks: Vec<_> = c.axis_chunks_iter_mut(Axis(0), rows).enumerate().collect();
    blocks.into_par_iter().for_each(|(i, mut cb)| {
        if !accumulate {
            cb.fill(0.0);
        }
        let r0 = i * rows;
        for p in partials {
            cb += &p.slice(s![r0..r0 + cb.nrows(), ..]);
        }
    });
    Ok(())
}

/// `A·B` into a new matrix, parallel over row tiles.
pub fn matmul(a: ArrayView2<f32>, b: ArrayView2<f32>) -> Result<Array2<f32>> {
    let mut c = Array2::<f32>::zeros((a.nrows(), b.ncols()));
    matmul_rows_par(c.view_mut(), a, b, false)?;
    Ok(c)
}

#[cfg(test)]
mod tests;
