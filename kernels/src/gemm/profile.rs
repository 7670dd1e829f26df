//! The GEMM profile: per thread, the CPU time and FLOPs of every product by shape and by how
//! it read its `A` operand, while profiling is on (`cptsim bench`'s per-shape rates).

use std::cell::RefCell;

use crate::cputime::thread_cpu_seconds;

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

/// Runs the product `f` of shape `(m, k, n)` reading `A` as `operand`, adding its CPU time and
/// FLOPs to the calling thread's profile while profiling is on.
pub(super) fn profiled((m, k, n): (usize, usize, usize), operand: OperandKind, f: impl FnOnce()) {
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
