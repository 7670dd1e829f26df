//! Integer matrix multiplication of quantized codes, as integer hardware does it: `C = A·B` for
//! `A`, `B` of integer codes spanning at most 16 bits each, the products summed in integers and
//! handed back as exact 64-bit sums (or as a narrower [`Accumulator`] would hold them), with the
//! row sums of `A` and the column sums of `B` that a caller needs to apply zero points and scales
//! once per output.
//!
//! **Forms.** Codes spanning ≤ 8 bits on both sides are multiplied as bytes (`u8` × `i8`, four
//! products per 32-bit lane and instruction, `vpdpbusd`), wider ones as 16-bit words (`i16` ×
//! `i16`, two per lane, `vpdpwssd` or `vpmaddwd`). Each operand is first shifted by a *zero
//! point* into the form's range, and the shift is undone exactly afterwards:
//!
//! ```text
//! Σ_k a·b = Σ_k (a − za)(b − zb) + zb·Σ_k a + za·Σ_k b − K·za·zb
//! ```
//!
//! **The offset trick.** `vpdpbusd` multiplies unsigned bytes by signed ones. Signed × signed
//! 8-bit codes (`a` in −128..=127) are shifted to `a + 128` (`za = −128`), and the product is
//! corrected by `−128·Σ_k b` per output column (plus `za`-free terms when `zb = 0`); unsigned ×
//! unsigned codes shift `B` instead (`b − 128`, corrected by `+128·Σ_k a` per row). Any two
//! ranges of ≤ 256 codes are handled the same way, so SBM's unsigned codes, DoReFa's and
//! WAGEUBN's signed ones all run on the byte form.
//!
//! **Exactness.** The instructions wrap modulo 2³² and never saturate; the kernels sum runs of
//! the reduction short enough (from the operands' largest magnitudes) that each run's exact sum
//! fits in 32 bits, and add the runs into 64-bit sums. Two 16-bit operands whose products could
//! overflow a 32-bit lane pair-wise (`(−2¹⁵)² · 2`) are split: `A = 256·hi + lo` with both
//! halves bytes, two word products. So every path, block size and thread count gives the same
//! integers, and the same as [`reference`].
//!
//! **Paths** ([`IntPath`], chosen at run time from the GEMMs' [`VectorPath`]): AVX-512 VNNI,
//! AVX-VNNI (256-bit), AVX2 (words only) and portable scalar code.

mod accumulator;
mod conv;
mod fused;
mod gather;
mod pack;
mod tile;
#[cfg(target_arch = "x86_64")]
mod x86;

use ndarray::{Array2, ArrayView2};
use rayon::prelude::*;

pub use accumulator::{Accumulator, Overflow};
pub use conv::{conv_dequant_uninit, reads_codes_in_place};
pub use fused::{
    matmul_dequant, matmul_dequant_uninit, row_stride, rows_len, Dequant, PackedB, PackedRows, Rows,
};
pub use gather::{gather_codes, with_byte_scratch};
pub use pack::Code;
use pack::{Form, Shift, PANEL, STEP_BYTES};
use tile::{Kernel, TileRows, TileSums, TILE_COLS, TILE_ROWS};

use crate::error::{KernelError, Result};
use crate::VectorPath;

/// The instruction set an integer GEMM runs with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntPath {
    /// AVX-512 VNNI (`vpdpbusd` / `vpdpwssd` on 512-bit registers).
    Avx512Vnni,
    /// AVX-VNNI (the same on 256-bit registers).
    AvxVnni,
    /// AVX2 `vpmaddwd` (bytes are multiplied as words).
    Avx2,
    /// Plain scalar code.
    Portable,
}

impl IntPath {
    /// Every path, widest first.
    pub const ALL: [IntPath; 4] = [
        IntPath::Avx512Vnni,
        IntPath::AvxVnni,
        IntPath::Avx2,
        IntPath::Portable,
    ];

    /// Its name: `avx512-vnni`, `avx-vnni`, `avx2` or `portable`.
    pub fn name(self) -> &'static str {
        match self {
            IntPath::Avx512Vnni => "avx512-vnni",
            IntPath::AvxVnni => "avx-vnni",
            IntPath::Avx2 => "avx2",
            IntPath::Portable => "portable",
        }
    }

    /// Whether this CPU runs it.
    pub fn runs_here(self) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            match self {
                IntPath::Avx512Vnni => has!("avx512f") && has!("avx512bw") && has!("avx512vnni"),
                IntPath::AvxVnni => has!("avx2") && has!("avxvnni"),
                IntPath::Avx2 => has!("avx2"),
                IntPath::Portable => true,
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            self == IntPath::Portable
        }
    }

    /// The widest integer path this CPU runs within `vector`'s instruction set (so
    /// `CPTSIM_VECTOR_PATH=avx2` keeps the integer GEMMs on 256-bit registers too).
    pub fn within(vector: VectorPath) -> IntPath {
        let allowed: &[IntPath] = match vector {
            VectorPath::Avx512 => &IntPath::ALL,
            VectorPath::Avx2 => &IntPath::ALL[1..],
            VectorPath::Portable => &IntPath::ALL[3..],
        };
        allowed
            .iter()
            .copied()
            .find(|p| p.runs_here())
            .unwrap_or(IntPath::Portable)
    }

    /// The kernel for `form` (AVX2 has words only).
    fn kernel(self, form: Form) -> Kernel {
        #[cfg(target_arch = "x86_64")]
        match self {
            IntPath::Avx512Vnni => return x86::avx512_vnni(form),
            IntPath::AvxVnni => return x86::avx_vnni(form),
            IntPath::Avx2 => return x86::avx2(),
            IntPath::Portable => {}
        }
        tile::portable(form)
    }
}

/// The integer path of this process's GEMMs: the widest within [`crate::gemm::vector_path`].
pub fn int_path() -> IntPath {
    IntPath::within(crate::gemm::vector_path())
}

/// The sums of an integer product `C = A·B`, with the operand sums that dequantizing it needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Product {
    /// `Σ_k a[i,k]·b[k,j]`, `m × n`, as the accumulator holds it.
    pub sums: Array2<i64>,
    /// `Σ_k a[i,k]` per row of `A` (exact).
    pub row_sums: Vec<i64>,
    /// `Σ_k b[k,j]` per column of `B` (exact).
    pub col_sums: Vec<i64>,
}

/// `C = A·B` on [`int_path`] (see the module docs); any strides.
pub fn matmul<T: Code>(a: ArrayView2<T>, b: ArrayView2<T>, acc: Accumulator) -> Result<Product> {
    matmul_on(int_path(), a, b, acc)
}

/// Steps of the reduction per kernel call at most (keeps a panel's run in L1).
const CACHE_STEPS: usize = 256;
/// Rows and columns of `C` per parallel task (multiples of every tile).
const TASK_ROWS: usize = 64;
const TASK_COLS: usize = 256;

/// [`matmul`] on `path`; an error if this CPU does not run it.
pub fn matmul_on<T: Code>(
    path: IntPath,
    a: ArrayView2<T>,
    b: ArrayView2<T>,
    acc: Accumulator,
) -> Result<Product> {
    let (m, k) = check(a, b)?;
    let n = b.ncols();
    if !path.runs_here() {
        return Err(KernelError::Invalid {
            what: format!("integer GEMM path {}", path.name()),
            msg: "this CPU does not run it".into(),
        });
    }
    let (ra, rb) = (pack::range(a, "A")?, pack::range(b, "B")?);
    let bytes = |r: (i64, i64)| r.1 - r.0 <= 255;
    let form = if bytes(ra) && bytes(rb) && path != IntPath::Avx2 {
        Form::Byte
    } else {
        Form::Word
    };
    let (ta, tb) = match form {
        Form::Byte => ((0, 255), (-128, 127)),
        Form::Word => ((-32768, 32767), (-32768, 32767)),
    };
    let za = pack::zero_point(ra, ta).ok_or_else(|| pack::too_wide("A", ra))?;
    let zb = pack::zero_point(rb, tb).ok_or_else(|| pack::too_wide("B", rb))?;
    let peak = |(lo, hi): (i64, i64), z: i64| (lo - z).abs().max((hi - z).abs()).max(1);
    let (pa, pb) = (peak(ra, za), peak(rb, zb));
    let per_step = form.terms() as i64 * pa * pb;
    // A run's exact sum stays within i32: split A into bytes when not even one step fits.
    let parts: Vec<(Shift, i64)> = if per_step > i64::from(i32::MAX) {
        vec![
            (
                Shift {
                    zero: za,
                    shift: 8,
                    low_byte: false,
                },
                256,
            ),
            (
                Shift {
                    zero: za,
                    shift: 0,
                    low_byte: true,
                },
                1,
            ),
        ]
    } else {
        vec![(Shift::plain(za), 1)]
    };
    let part_peak = if parts.len() > 1 { 255 } else { pa };
    let run = ((i64::from(i32::MAX) / (form.terms() as i64 * part_peak * pb)) as usize)
        .clamp(1, CACHE_STEPS);
    let mut sums = Array2::<i64>::zeros((m, n));
    let mut row_sums: Option<Vec<i64>> = None;
    let steps = pack::steps(k, form);
    if m > 0 && n > 0 && steps > 0 {
        let kernel = path.kernel(form);
        let packed_b = pack::pack_b(b, form, Shift::plain(zb))?;
        for (shift, weight) in parts {
            let (packed_a, sums_a) = pack::pack_a(a, form, shift)?;
            if weight == 1 && !shift.low_byte {
                row_sums = Some(sums_a.iter().map(|s| s + k as i64 * za).collect());
            }
            let geometry = Geometry {
                m,
                n,
                steps,
                run,
                weight,
            };
            drive(kernel, &packed_a, &packed_b, geometry, &mut sums);
        }
    }
    let row_sums: Vec<i64> = row_sums.unwrap_or_else(|| {
        a.rows()
            .into_iter()
            .map(|r| r.iter().map(|&x| x.int()).sum())
            .collect()
    });
    let col_sums: Vec<i64> = b
        .columns()
        .into_iter()
        .map(|c| c.iter().map(|&x| x.int()).sum())
        .collect();
    let kk = k as i64;
    for (mut row, &ra) in sums.rows_mut().into_iter().zip(&row_sums) {
        for (v, &cb) in row.iter_mut().zip(&col_sums) {
            *v += zb * ra + za * cb - kk * za * zb;
        }
    }
    acc.apply(&mut sums, a, b);
    Ok(Product {
        sums,
        row_sums,
        col_sums,
    })
}

/// The defining sums, one element at a time: `s ← acc.add(s, a[i,k]·b[k,j])` for `k` in order.
pub fn reference(a: ArrayView2<i32>, b: ArrayView2<i32>, acc: Accumulator) -> Result<Array2<i64>> {
    check(a, b)?;
    Ok(Array2::from_shape_fn((a.nrows(), b.ncols()), |(i, j)| {
        a.row(i)
            .iter()
            .zip(b.column(j))
            .fold(0, |s, (&x, &y)| acc.add(s, i64::from(x) * i64::from(y)))
    }))
}

/// `(m, k)` of a conforming product whose sums cannot overflow 64 bits.
fn check<T>(a: ArrayView2<T>, b: ArrayView2<T>) -> Result<(usize, usize)> {
    let (m, k) = a.dim();
    if k != b.nrows() {
        return Err(KernelError::shape(
            "integer gemm",
            format!("A{:?} · B{:?} does not conform", a.dim(), b.dim()),
        ));
    }
    if k > i32::MAX as usize {
        return Err(KernelError::shape(
            "integer gemm",
            format!("a reduction of {k} terms is longer than 2^31 − 1"),
        ));
    }
    Ok((m, k))
}

/// The sizes one [`drive`] works on.
#[derive(Clone, Copy)]
struct Geometry {
    m: usize,
    n: usize,
    steps: usize,
    /// Steps per kernel call (each call's exact sum fits in 32 bits).
    run: usize,
    /// Factor of this part's sums (256 for the high half of a split operand).
    weight: i64,
}

/// Adds `weight · A·B` of packed operands into `out`, in parallel tasks of
/// `TASK_ROWS × TASK_COLS` outputs (integers: the split does not change a result).
fn drive(kernel: Kernel, pa: &[u8], pb: &[u8], g: Geometry, out: &mut Array2<i64>) {
    let tasks: Vec<(usize, usize)> = (0..g.m.div_ceil(TASK_ROWS))
        .flat_map(|r| (0..g.n.div_ceil(TASK_COLS)).map(move |c| (r * TASK_ROWS, c * TASK_COLS)))
        .collect();
    let blocks: Vec<Vec<i64>> = tasks
        .par_iter()
        .map(|&(i0, j0)| task(kernel, pa, pb, g, i0, j0))
        .collect();
    for (&(i0, j0), block) in tasks.iter().zip(&blocks) {
        let cols = TASK_COLS.min(g.n - j0);
        for (r, row) in block.chunks(cols).enumerate() {
            for (c, v) in row.iter().enumerate() {
                out[[i0 + r, j0 + c]] += v;
            }
        }
    }
}

/// One task of [`drive`]: the outputs from `(i0, j0)`, row-major.
fn task(kernel: Kernel, pa: &[u8], pb: &[u8], g: Geometry, i0: usize, j0: usize) -> Vec<i64> {
    let (rows, cols) = (TASK_ROWS.min(g.m - i0), TASK_COLS.min(g.n - j0));
    let mut block = vec![0i64; rows * cols];
    let lda = g.steps * STEP_BYTES;
    let panel = g.steps * PANEL * STEP_BYTES;
    let mut sums: TileSums = [0; TILE_ROWS * TILE_COLS];
    for s0 in (0..g.steps).step_by(g.run) {
        let ns = g.run.min(g.steps - s0);
        for jt in (0..cols).step_by(kernel.cols) {
            let b = pb[(j0 + jt) / PANEL * panel + s0 * PANEL * STEP_BYTES..].as_ptr();
            let tile = match kernel.narrow {
                Some(narrow) if cols - jt <= PANEL => narrow,
                _ => kernel.tile,
            };
            for it in (0..rows).step_by(kernel.rows) {
                let a =
                    TileRows::strided(pa[(i0 + it) * lda + s0 * STEP_BYTES..].as_ptr(), lda, ns);
                // SAFETY: `A` is packed with rows padded to 8 and `B` with columns padded to
                // two panels, each `steps` steps long, so the tile's rows and panels exist from
                // step `s0` for `ns` steps; `kernel` runs on this CPU (its path was checked).
                unsafe { tile(&a, b, panel, &mut sums) };
                for r in 0..kernel.rows.min(rows - it) {
                    let dst = &mut block[(it + r) * cols + jt..];
                    let src = &sums[r * TILE_COLS..];
                    for c in 0..kernel.cols.min(cols - jt) {
                        dst[c] += g.weight * i64::from(src[c]);
                    }
                }
            }
        }
    }
    block
}

#[cfg(test)]
mod tests;
