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
//! * [`matmul_rows_par`] splits the rows of the output into tiles of [`ROW_TILE`] rows;
//! * [`matmul_tn_reduce_par`] splits a long reduction into chunks of [`REDUCE_CHUNK`] and adds the
//!   partial products in chunk order.

mod blocked;
mod kernel;
mod patches;
mod transpose;

use std::cell::RefCell;
use std::mem::MaybeUninit;
use std::sync::OnceLock;

use blocked::{OperandA, OperandB, Strided};
use ndarray::{s, Array2, ArrayView2, ArrayViewMut2, Axis};
pub use patches::{PatchGeometry, Patches};
use rayon::prelude::*;

use crate::cputime::thread_cpu_seconds;
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

thread_local! {
    /// Per-thread GEMM profile, per shape; `None` while profiling is off.
    static PROFILE: RefCell<Option<Vec<ShapeTime>>> = const { RefCell::new(None) };
}

/// How a product read its `A` operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum OperandKind {
    /// A strided matrix (linear layers, pointwise convs, gathered columns, the error GEMM of an
    /// unpadded conv).
    Strided,
    /// A convolution's patches read in place (conv forward, and the error GEMM of a padded conv
    /// run as the transposed conv).
    Patches,
    /// A convolution's patches transposed, read in place (the weight gradient).
    PatchesT,
    /// A Winograd conv's transformed tiles (forward, input gradient) or transformed output
    /// gradient (weight gradient), one of its 16 products per chunk of tiles (read as a strided
    /// matrix).
    Winograd,
}

impl OperandKind {
    /// A short name for tables.
    pub fn name(self) -> &'static str {
        match self {
            OperandKind::Strided => "strided",
            OperandKind::Patches => "patches",
            OperandKind::PatchesT => "patches-t",
            OperandKind::Winograd => "winograd",
        }
    }
}

/// The GEMM calls of one shape `C[m, n] = A[m, k]·B[k, n]` while profiling was on.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ShapeTime {
    pub m: usize,
    pub k: usize,
    pub n: usize,
    pub operand: OperandKind,
    pub calls: u64,
    /// Floating-point operations (2 per multiply-add).
    pub flops: u64,
    /// Thread CPU seconds inside these calls, summed over threads.
    pub seconds: f64,
}

impl ShapeTime {
    /// GFLOP per CPU-second of these calls.
    pub fn gflops(&self) -> f64 {
        self.flops as f64 / self.seconds.max(1e-9) / 1e9
    }

    fn key(&self) -> (usize, usize, usize, OperandKind) {
        (self.m, self.k, self.n, self.operand)
    }
}

/// GEMM work done while profiling was on: FLOPs and the CPU time spent inside GEMM calls,
/// summed over threads (so comparable with one core's peak), in total and per shape.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GemmProfile {
    /// Floating-point operations (2 per multiply-add).
    pub flops: u64,
    /// Thread CPU seconds inside [`matmul_into`], summed over all threads.
    pub seconds: f64,
    /// The same per shape and operand kind, in order of their first call on each thread.
    pub shapes: Vec<ShapeTime>,
}

impl GemmProfile {
    /// GFLOP per CPU-second inside the GEMM calls (per core: summed over threads).
    pub fn gflops(&self) -> f64 {
        self.flops as f64 / self.seconds.max(1e-9) / 1e9
    }
}

/// Turns GEMM profiling on or off on the calling thread and every thread of the current rayon
/// pool, and returns what they counted since the last call (two thread-CPU-clock reads per GEMM
/// call while on).
pub fn profile(on: bool) -> GemmProfile {
    let take = || PROFILE.with(|p| p.replace(on.then(Vec::new)));
    let mut parts = rayon::broadcast(|_| take());
    parts.push(take());
    let mut total = GemmProfile::default();
    for t in parts.into_iter().flatten().flatten() {
        total.flops += t.flops;
        total.seconds += t.seconds;
        add_shape(&mut total.shapes, t);
    }
    total
}

/// Adds `t` into the entry of its shape in `shapes`, or appends it.
fn add_shape(shapes: &mut Vec<ShapeTime>, t: ShapeTime) {
    match shapes.iter_mut().find(|s| s.key() == t.key()) {
        Some(s) => {
            s.calls += t.calls;
            s.flops += t.flops;
            s.seconds += t.seconds;
        }
        None => shapes.push(t),
    }
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

/// Runs the product `f` of shape `(m, k, n)` reading `A` as `operand`, adding its CPU time and
/// FLOPs to the calling thread's profile while profiling is on.
fn profiled((m, k, n): (usize, usize, usize), operand: OperandKind, f: impl FnOnce()) {
    let started = PROFILE
        .with(|p| p.borrow().is_some())
        .then(thread_cpu_seconds);
    f();
    if let Some(t0) = started {
        let t = ShapeTime {
            m,
            k,
            n,
            operand,
            calls: 1,
            flops: 2 * (m * k * n) as u64,
            seconds: thread_cpu_seconds() - t0,
        };
        PROFILE.with(|p| {
            if let Some(shapes) = p.borrow_mut().as_mut() {
                add_shape(shapes, t);
            }
        });
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
    let threads = rayon::current_num_threads();
    let tile = if threads > 1 {
        ROW_TILE.min(a.nrows().div_ceil(2 * threads).next_multiple_of(24))
    } else {
        ROW_TILE
    };
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
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn random(r: usize, c: usize, seed: u64) -> Array2<f32> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        Array2::from_shape_fn((r, c), |_| rng.random_range(-1.0..1.0))
    }

    fn naive(a: ArrayView2<f32>, b: ArrayView2<f32>) -> Array2<f64> {
        Array2::from_shape_fn((a.nrows(), b.ncols()), |(i, j)| {
            (0..a.ncols())
                .map(|k| a[[i, k]] as f64 * b[[k, j]] as f64)
                .sum()
        })
    }

    fn assert_close(c: &Array2<f32>, r: &Array2<f64>, k: usize) {
        let tol = 1e-5 * k as f64;
        for (x, y) in c.iter().zip(r.iter()) {
            assert!((*x as f64 - y).abs() <= tol, "{x} vs {y}");
        }
    }

    #[test]
    fn matches_naive_on_odd_shapes_and_strides() {
        for &(m, n, k) in &[(1, 1, 1), (7, 5, 3), (33, 17, 65), (2100, 9, 27)] {
            let a = random(m, k, 1);
            let bt = random(n, k, 2); // use a transposed view for B
            let c = matmul(a.view(), bt.t()).unwrap();
            assert_close(&c, &naive(a.view(), bt.t()), k);
        }
    }

    /// The defining order: `c ← fma(a[i,p], b[p,j], c)` for p in order, from 0 or from `c0`.
    fn fused_chain(
        a: ArrayView2<f32>,
        b: ArrayView2<f32>,
        c0: Option<&Array2<f32>>,
    ) -> Array2<f32> {
        Array2::from_shape_fn((a.nrows(), b.ncols()), |(i, j)| {
            let init = c0.map_or(0.0, |c| c[[i, j]]);
            (0..a.ncols()).fold(init, |c, p| a[[i, p]].mul_add(b[[p, j]], c))
        })
    }

    fn paths() -> Vec<VectorPath> {
        VectorPath::runnable().collect()
    }

    #[test]
    fn every_path_gives_the_fused_chain_bit_for_bit() {
        // Shapes crossing every block edge (tile rows, NR, KC = 256, MC = 144, NC = 1024), rows
        // that alias in L1 (`blocked::rows_spread_over_l1`), both
        // orientations (m < n is computed as Cᵀ = Bᵀ·Aᵀ), transposed and strided views, and
        // accumulation into C.
        let shapes = [
            (1, 1, 1),
            (7, 5, 3),
            (13, 17, 300),
            (150, 33, 27),
            (5, 1100, 40),
            (40, 1030, 9),
            (300, 16, 520),
            // Rows 4 KiB apart (B read by rows: its panels are packed).
            (150, 70, 1024),
            (9, 1024, 300),
            // Short last tiles split with the whole one before (AVX2: 8 = 4 + 4, 14 = 6 + 4 + 4,
            // 32 = 4·6 + 4 + 4; AVX-512, one panel: 14 = 7 + 7, 16 = 8 + 8; two panels: 10 =
            // 5 + 5, 17 = 8 + 5 + 4).
            (8, 20, 33),
            (14, 9, 70),
            (16, 40, 5),
            (32, 17, 260),
            (10, 48, 20),
            (17, 64, 11),
            // One panel on 27 and 54 rows: AVX-512's tiles of three groups of nine rows.
            (27, 16, 40),
            (54, 9, 300),
        ];
        for (s, &(m, n, k)) in shapes.iter().enumerate() {
            let s = s as u64;
            let a = random(m, k, 10 + s);
            let bt = random(n, k, 20 + s);
            let c0 = random(m, n, 30 + s);
            let wide = random(m, 2 * n, 40 + s);
            // B by columns (a transposed view) and by rows (read in place, bar a last partial
            // panel).
            let b_rows = bt.t().as_standard_layout().into_owned();
            for (accumulate, b) in [(false, bt.t()), (true, bt.t()), (false, b_rows.view())] {
                let want = fused_chain(a.view(), b, accumulate.then_some(&c0));
                for path in paths() {
                    let what = format!("{path:?} {m}x{n}x{k} accumulate {accumulate}");
                    // C as a strided view (every other column of a wider matrix).
                    let mut big = wide.clone();
                    let mut c = big.slice_mut(ndarray::s![.., ..;2]);
                    c.assign(&c0);
                    // SAFETY: `path` runs here; the shapes conform and are non-empty.
                    unsafe { product(path, strided_mut(&mut c), a.view(), b, accumulate) };
                    assert_eq!(c, want, "{what}");
                    // The skipped columns are untouched.
                    let odd = ndarray::s![.., 1..;2];
                    assert_eq!(big.slice(odd), wide.slice(odd), "{what}");
                    // C stored by columns (computed as Cᵀ = Bᵀ·Aᵀ).
                    let mut ct = c0.t().as_standard_layout().into_owned();
                    let ctv = strided_mut(&mut ct.view_mut().reversed_axes());
                    // SAFETY: as above.
                    unsafe { product(path, ctv, a.view(), b, accumulate) };
                    assert_eq!(ct.t(), want, "{what}, C by columns");
                }
            }
        }
    }

    #[test]
    fn patches_give_the_im2col_product_on_every_path() {
        // 40 samples of a padded 9×8×40 input, 3×3 kernel, stride (2, 1), dilation 2 rows:
        // 360 terms (the 256-term blocks end inside a kernel row), 2 panels, 600 rows (blocks
        // of 144). Transposed, the 600 pixels are the terms: the 512-term blocks end inside an
        // output row and inside a sample.
        let g = PatchGeometry {
            padded: [9, 8, 40],
            out: (3, 5),
            kernel: (3, 3),
            stride: (2, 1),
            dilation_y: 2,
        };
        check_patches(g, 40, 20, (600, 360));
        // Output rows of 20 pixels against 16 columns: AVX-512 takes the tiles of 24 rows whose
        // three groups of 8 pixels each lie in one output row on its tall tiles
        // (`kernel::tall`), the others on the 12-row ones.
        let g = PatchGeometry {
            padded: [9, 22, 16],
            out: (7, 20),
            kernel: (3, 3),
            stride: (1, 1),
            dilation_y: 1,
        };
        check_patches(g, 3, 16, (420, 144));
        // conv1 of a CIFAR ResNet on output rows of 9 pixels: neither its rows nor, transposed,
        // its 27 terms (kernel rows of 9) group by eight, so AVX-512 takes tiles of three groups
        // of nine (`kernel::tall`).
        let g = PatchGeometry {
            padded: [7, 11, 3],
            out: (5, 9),
            kernel: (3, 3),
            stride: (1, 1),
            dilation_y: 1,
        };
        check_patches(g, 2, 16, (90, 27));
    }

    #[test]
    fn random_geometries_give_the_im2col_product_on_every_path() {
        // Output rows of 1–40 pixels, 1–20 channels, strides, dilations and kernels up to 3×4,
        // 1–40 columns: tiles whose rows group by eight (AVX-512's tall tiles) and tiles whose
        // rows do not, in one strip, against the fused chains of the im2col matrix.
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        for _ in 0..40 {
            let mut pick = |lo: usize, hi: usize| rng.random_range(lo..=hi);
            let (kh, kw, sy, sx, dy) = (pick(1, 3), pick(1, 4), pick(1, 2), pick(1, 2), pick(1, 2));
            let (oh, ow, c, samples, n) = (
                pick(1, 6),
                pick(1, 40),
                pick(1, 20),
                pick(1, 3),
                pick(1, 40),
            );
            let hp = (oh - 1) * sy + (kh - 1) * dy + 1 + pick(0, 1);
            let wp = (ow - 1) * sx + kw + pick(0, 1);
            let g = PatchGeometry {
                padded: [hp, wp, c],
                out: (oh, ow),
                kernel: (kh, kw),
                stride: (sy, sx),
                dilation_y: dy,
            };
            check_patches(g, samples, n, (samples * oh * ow, kh * kw * c));
        }
    }

    /// Checks the product of `samples` inputs' patches with a random `B` of `n` columns, and of
    /// the transposed patches, against the fused chains of the im2col matrix, on every path.
    fn check_patches(g: PatchGeometry, samples: usize, n: usize, dim: (usize, usize)) {
        let [hp, wp, c] = g.padded;
        let ((oh, ow), (_, kw), (sy, sx)) = (g.out, g.kernel, g.stride);
        let x = random(samples, hp * wp * c, 50);
        let x = x.as_slice().unwrap();
        let p = Patches::new(x, samples, g).unwrap();
        let (m, k) = p.dim();
        assert_eq!((m, k), dim);
        let a = Array2::from_shape_fn((m, k), |(i, t)| {
            let (s, oy, ox) = (i / (oh * ow), i / ow % oh, i % ow);
            let (ky, kx, ch) = (t / (kw * c), t / c % kw, t % c);
            x[((s * hp + oy * sy + ky * g.dilation_y) * wp + ox * sx + kx) * c + ch]
        });
        let b = random(k, n, 51);
        let want = fused_chain(a.view(), b.view(), None);
        let bt = random(m, n, 52);
        let want_t = fused_chain(a.t(), bt.view(), None);
        for path in paths() {
            let packed = PackedB::new(b.view());
            for bv in [B::View(b.view()).operand(), B::Packed(&packed).operand()] {
                let mut got = Array2::<f32>::from_elem((m, n), f32::NAN);
                let cv = strided_mut(&mut got.view_mut());
                // SAFETY: `path` runs here; the shapes conform; `p` was checked against `x`.
                unsafe { blocked::gemm(path, (m, n, k), OperandA::Patches(&p), bv, cv, false) };
                assert_eq!(got, want, "{path:?}");
            }
            let mut got = Array2::<f32>::from_elem((k, n), f32::NAN);
            let cv = strided_mut(&mut got.view_mut());
            let bv = OperandB::Strided(Strided::new(bt.as_ptr(), bt.strides()));
            // SAFETY: as above.
            unsafe { blocked::gemm(path, (k, n, m), OperandA::PatchesT(&p), bv, cv, false) };
            assert_eq!(got, want_t, "{path:?} transposed");
        }
    }

    #[test]
    fn accumulate_adds_to_existing() {
        let a = random(40, 30, 3);
        let b = random(30, 20, 4);
        let mut c = Array2::<f32>::ones((40, 20));
        matmul_into(c.view_mut(), a.view(), b.view(), true).unwrap();
        let r = naive(a.view(), b.view()).mapv(|v| v + 1.0);
        assert_close(&c, &r, 30);
    }

    #[test]
    fn reduce_matches_naive_and_is_thread_count_independent() {
        let a = random(10_000, 16, 5);
        let b = random(10_000, 24, 6);
        let run = |threads: usize| {
            cptsim_testdata::with_threads(threads, || {
                let mut c = Array2::<f32>::zeros((16, 24));
                matmul_tn_reduce_par(c.view_mut(), a.view(), b.view(), false).unwrap();
                c
            })
            .unwrap()
        };
        let c1 = run(1);
        let c2 = run(2);
        assert_eq!(c1, c2);
        assert_close(&c1, &naive(a.t(), b.view()), 10_000);
    }

    #[test]
    fn partials_add_in_their_order_on_any_thread_count() {
        // Several row blocks (PARTIALS_CHUNK / 24 rows each) and a last short one.
        let parts: Vec<_> = (0..5).map(|s| random(2_000, 24, s)).collect();
        for accumulate in [false, true] {
            let mut want = random(2_000, 24, 9);
            if !accumulate {
                want.fill(0.0);
            }
            for p in &parts {
                want += p;
            }
            for threads in [1, 2] {
                let c = cptsim_testdata::with_threads(threads, || {
                    let mut c = random(2_000, 24, 9);
                    add_partials(c.view_mut(), &parts, accumulate).unwrap();
                    c
                })
                .unwrap();
                assert_eq!(c, want, "accumulate {accumulate}, {threads} thread(s)");
            }
        }
        let mut c = Array2::<f32>::zeros((3, 4));
        let e = add_partials(c.view_mut(), &[random(4, 3, 1)], false).unwrap_err();
        assert!(e.to_string().contains("(4, 3)"), "{e}");
    }

    #[test]
    fn uninitialised_output_gets_the_same_product_bit_for_bit() {
        // One and several reduction blocks (256 terms), an empty reduction, a transposed B.
        for &(m, n, k) in &[(7, 5, 3), (300, 33, 600), (9, 4, 0)] {
            let a = random(m, k, 11);
            let b = random(n, k, 12);
            let mut want = Array2::<f32>::from_elem((m, n), f32::NAN);
            matmul_into(want.view_mut(), a.view(), b.t(), false).unwrap();
            let mut c = vec![MaybeUninit::new(f32::NAN); m * n];
            let got = matmul_uninit(&mut c, a.view(), b.t()).unwrap();
            assert_eq!(got, want.as_slice().unwrap(), "{m}×{n}×{k}");
        }
        let (a, b) = (random(4, 3, 7), random(3, 5, 8));
        let mut c = vec![MaybeUninit::new(0.0); 19];
        let e = matmul_uninit(&mut c, a.view(), b.view()).unwrap_err();
        assert!(e.to_string().contains("does not conform"), "{e}");
    }

    #[test]
    fn packed_b_gives_the_same_product_bit_for_bit() {
        // Partial last panel, several reduction blocks, more columns than one block (NC = 1024),
        // an empty reduction; B transposed (a conv's weights) and plain.
        for &(m, n, k) in &[(7, 5, 3), (300, 33, 600), (20, 1030, 70), (9, 4, 0)] {
            let a = random(m, k, 13);
            let w = random(n, k, 14);
            for b in [w.t(), w.t().as_standard_layout().into_owned().view()] {
                let mut want = vec![MaybeUninit::new(f32::NAN); m * n];
                let want = matmul_uninit(&mut want, a.view(), b).unwrap().to_vec();
                let packed = PackedB::new(b);
                let mut c = vec![MaybeUninit::new(f32::NAN); m * n];
                let got = matmul_uninit(&mut c, a.view(), &packed).unwrap();
                assert_eq!(got, &want[..], "{m}×{n}×{k}");
            }
        }
        let packed = PackedB::new(random(3, 5, 8).view());
        let mut c = vec![MaybeUninit::new(0.0); 20];
        let e = matmul_uninit(&mut c, random(4, 4, 7).view(), &packed).unwrap_err();
        assert!(e.to_string().contains("does not conform"), "{e}");
    }

    #[test]
    fn shape_mismatch_is_an_error() {
        let a = random(4, 3, 7);
        let b = random(4, 3, 8);
        let e = matmul(a.view(), b.view()).unwrap_err();
        assert!(e.to_string().contains("does not conform"), "{e}");
    }
}
