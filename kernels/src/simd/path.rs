//! The vector instruction sets the kernels run with, and which of them this CPU has.

/// The vector instruction set a kernel runs with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VectorPath {
    /// 512-bit AVX-512F fused multiply-add (16 lanes).
    Avx512,
    /// 256-bit AVX2 with FMA (8 lanes).
    Avx2,
    /// Plain code for the build target (x86-64: 128-bit SSE2 multiply and add, no FMA).
    Portable,
}

impl VectorPath {
    /// The widest path this CPU runs.
    pub fn detect() -> VectorPath {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512f") {
                return VectorPath::Avx512;
            }
            if std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
            {
                return VectorPath::Avx2;
            }
        }
        VectorPath::Portable
    }

    /// fp32 lanes per vector register.
    pub fn lanes(self) -> usize {
        match self {
            VectorPath::Avx512 => 16,
            VectorPath::Avx2 => 8,
            VectorPath::Portable => 4,
        }
    }

    /// Every path, widest first.
    pub const ALL: [VectorPath; 3] = [VectorPath::Avx512, VectorPath::Avx2, VectorPath::Portable];

    /// The path named `name` (see [`VectorPath::name`]).
    pub fn from_name(name: &str) -> Option<VectorPath> {
        Self::ALL.into_iter().find(|p| p.name() == name)
    }

    /// Its name: `avx512`, `avx2` or `portable`.
    pub fn name(self) -> &'static str {
        match self {
            VectorPath::Avx512 => "avx512",
            VectorPath::Avx2 => "avx2",
            VectorPath::Portable => "portable",
        }
    }

    /// The paths this CPU runs, widest first.
    pub fn runnable() -> impl Iterator<Item = VectorPath> {
        Self::ALL.into_iter().filter(|p| p.runs_here())
    }

    /// Whether this CPU runs the path (every path narrower than the widest it has).
    pub fn runs_here(self) -> bool {
        match (self, VectorPath::detect()) {
            (VectorPath::Portable, _) => true,
            (VectorPath::Avx2, d) => d != VectorPath::Portable,
            (VectorPath::Avx512, d) => d == VectorPath::Avx512,
        }
    }

    /// A short description for reports, e.g. `AVX-512 (512-bit FMA)`.
    pub fn describe(self) -> &'static str {
        match self {
            VectorPath::Avx512 => "AVX-512 (512-bit FMA)",
            VectorPath::Avx2 => "AVX2+FMA (256-bit FMA)",
            VectorPath::Portable => "portable (128-bit multiply + add)",
        }
    }

    /// [`VectorPath::describe`] of this path as the widest this CPU runs (what the FMA peak is
    /// measured on): the portable one says why it is the widest.
    pub fn describe_as_widest(self) -> &'static str {
        match self {
            VectorPath::Portable => "portable (no AVX2+FMA on this CPU: 128-bit multiply + add)",
            p => p.describe(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_named_and_the_portable_one_runs_everywhere() {
        for path in VectorPath::ALL {
            assert_eq!(VectorPath::from_name(path.name()), Some(path));
        }
        assert_eq!(VectorPath::from_name("avx512"), Some(VectorPath::Avx512));
        assert_eq!(VectorPath::from_name("AVX2"), None);
        // Only as the widest path does the portable one blame the CPU (it also runs when chosen
        // with CPTSIM_VECTOR_PATH on a CPU with AVX2).
        assert!(!VectorPath::Portable.describe().contains("this CPU"));
        assert!(VectorPath::Portable
            .describe_as_widest()
            .contains("no AVX2+FMA on this CPU"));
        assert_eq!(
            VectorPath::Avx2.describe_as_widest(),
            VectorPath::Avx2.describe()
        );
        assert!(VectorPath::Portable.runs_here());
        assert!(VectorPath::detect().runs_here());
    }
}
