//! The accumulator a simulated integer GEMM sums its products in: exact (wide enough never to
//! overflow), or a `bits`-wide two's-complement register that wraps or saturates.
//!
//! The sum it models is `Σ_k a[i,k]·b[k,j]` of the operands' integer codes, one register per
//! output element starting from 0, one add per term in the order `k = 0, 1, …`. Each product
//! is exact (a multiplier is as wide as its operands need); the register is not:
//! * **wrap**: after each add the register keeps the low `bits` bits, read as two's complement.
//!   Wrapping is arithmetic modulo `2^bits`, so wrapping at every add gives the same value as
//!   wrapping the exact sum once at the end, whatever order or blocking the terms are added in:
//!   every kernel computes the exact sum and wraps it.
//! * **saturate**: after each add the register is clamped to `[−2^(bits−1), 2^(bits−1) − 1]`.
//!   This depends on the order of the terms, so it is defined sequentially over `k`. When all
//!   of an element's products have one sign (unsigned codes on both sides, as SBM's are), its
//!   partial sums move one way and the register equals the exact sum clamped once; when no
//!   partial sum can reach the bounds (`K·max|a|·max|b|` fits) it equals the exact sum;
//!   otherwise the element is summed again term by term in that order (a slower, scalar loop).

use std::fmt;
use std::str::FromStr;

use ndarray::{Array2, ArrayView2};

use super::pack::Code;
use crate::error::{KernelError, Result};

/// What a register does with a sum that does not fit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Overflow {
    /// Keep the low bits (two's complement).
    Wrap,
    /// Clamp to the largest or smallest value.
    Saturate,
}

/// The accumulator of an integer GEMM: exact, or `bits` wide with an [`Overflow`] rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Accumulator {
    /// Wide enough never to overflow (64-bit sums of products of ≤ 16-bit codes).
    #[default]
    Exact,
    /// A `bits`-wide (2..=63) two's-complement register.
    Narrow {
        /// Register width.
        bits: u8,
        /// Wrap or saturate.
        overflow: Overflow,
    },
}

impl Accumulator {
    /// Widest narrow register (a 64-bit one is [`Accumulator::Exact`]).
    pub const MAX_BITS: u8 = 63;
    /// Narrowest register.
    pub const MIN_BITS: u8 = 2;

    /// A `bits`-wide register; an error outside `2..=64` (64 is exact).
    pub fn narrow(bits: u32, overflow: Overflow) -> Result<Self> {
        match bits {
            64 => Ok(Accumulator::Exact),
            b if (u32::from(Self::MIN_BITS)..=u32::from(Self::MAX_BITS)).contains(&b) => {
                Ok(Accumulator::Narrow {
                    bits: b as u8,
                    overflow,
                })
            }
            _ => Err(KernelError::Invalid {
                what: "accumulator width".into(),
                msg: format!("{bits} bits (allowed: 2..=64, 64 = exact)"),
            }),
        }
    }

    /// Register width in bits (64 when exact).
    pub fn bits(self) -> u32 {
        match self {
            Accumulator::Exact => 64,
            Accumulator::Narrow { bits, .. } => u32::from(bits),
        }
    }

    /// The register after adding `p` to `s` (both in its range).
    #[inline]
    pub fn add(self, s: i64, p: i64) -> i64 {
        match self {
            Accumulator::Exact => s.wrapping_add(p),
            Accumulator::Narrow { bits, overflow } => {
                let t = i128::from(s) + i128::from(p);
                match overflow {
                    Overflow::Wrap => wrap(t as i64, bits),
                    Overflow::Saturate => {
                        let (lo, hi) = bounds(bits);
                        t.clamp(i128::from(lo), i128::from(hi)) as i64
                    }
                }
            }
        }
    }

    /// Applies the register to exact sums `c` of `a · b` (the operands they came from, for the
    /// elements a saturating register must sum again).
    pub(super) fn apply<T: Code>(self, c: &mut Array2<i64>, a: ArrayView2<T>, b: ArrayView2<T>) {
        let Accumulator::Narrow { bits, overflow } = self else {
            return;
        };
        match overflow {
            Overflow::Wrap => c.iter_mut().for_each(|v| *v = wrap(*v, bits)),
            Overflow::Saturate => {
                let k = a.ncols() as i128;
                let peak = |v: ArrayView2<T>| {
                    v.iter()
                        .map(|x| i128::from(x.int()).abs())
                        .max()
                        .unwrap_or(0)
                };
                let (_, hi) = bounds(bits);
                if k * peak(a) * peak(b) <= i128::from(hi) {
                    return;
                }
                let rows: Vec<Signs> = a.rows().into_iter().map(Signs::of).collect();
                let cols: Vec<Signs> = b.columns().into_iter().map(Signs::of).collect();
                for ((i, j), v) in c.indexed_iter_mut() {
                    *v = if rows[i].one_signed_with(cols[j]) {
                        self.settle(*v)
                    } else {
                        a.row(i)
                            .iter()
                            .zip(b.column(j))
                            .fold(0, |s, (&x, &y)| self.add(s, x.int() * y.int()))
                    };
                }
            }
        }
    }

    /// The register's value for terms whose exact sum is `v`: wrapped, or (for terms of one
    /// sign, whose partial sums move one way, so that none clips before the last) clamped.
    #[inline]
    pub(super) fn settle(self, v: i64) -> i64 {
        match self {
            Accumulator::Exact => v,
            Accumulator::Narrow { bits, overflow } => match overflow {
                Overflow::Wrap => wrap(v, bits),
                Overflow::Saturate => {
                    let (lo, hi) = bounds(bits);
                    v.clamp(lo, hi)
                }
            },
        }
    }
}

/// Which signs a row or column of codes holds.
#[derive(Clone, Copy)]
struct Signs {
    negative: bool,
    positive: bool,
}

impl Signs {
    fn of<T: Code>(v: ndarray::ArrayView1<T>) -> Self {
        v.iter().fold(
            Signs {
                negative: false,
                positive: false,
            },
            |s, x| Signs {
                negative: s.negative || x.int() < 0,
                positive: s.positive || x.int() > 0,
            },
        )
    }

    /// Whether every product of a code here with one of `other` has the same sign (or is 0).
    fn one_signed_with(self, other: Signs) -> bool {
        let (a, b) = (self, other);
        !((a.positive && b.positive || a.negative && b.negative)
            && (a.positive && b.negative || a.negative && b.positive))
    }
}

/// `v` reduced to `bits` bits of two's complement.
#[inline]
fn wrap(v: i64, bits: u8) -> i64 {
    let shift = 64 - u32::from(bits);
    (v << shift) >> shift
}

/// The smallest and largest value of a `bits`-wide register.
fn bounds(bits: u8) -> (i64, i64) {
    let hi = (1i64 << (bits - 1)) - 1;
    (-hi - 1, hi)
}

impl Accumulator {
    /// What the register does with a sum that does not fit: `exact` (it never overflows),
    /// `wrap` or `saturate`.
    pub fn mode(self) -> &'static str {
        match self {
            Accumulator::Exact => "exact",
            Accumulator::Narrow {
                overflow: Overflow::Wrap,
                ..
            } => "wrap",
            Accumulator::Narrow {
                overflow: Overflow::Saturate,
                ..
            } => "saturate",
        }
    }
}

impl fmt::Display for Accumulator {
    /// `exact`, or `BITS:wrap` / `BITS:saturate` (what [`Accumulator::from_str`] reads).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Accumulator::Exact => write!(f, "exact"),
            Accumulator::Narrow { bits, .. } => write!(f, "{bits}:{}", self.mode()),
        }
    }
}

impl FromStr for Accumulator {
    type Err = KernelError;

    /// `exact`, `BITS` (wrapping), `BITS:wrap` or `BITS:saturate`, `BITS` in 2..=64.
    fn from_str(s: &str) -> Result<Self> {
        let bad = |msg: String| KernelError::Invalid {
            what: format!("accumulator `{s}`"),
            msg,
        };
        if s == "exact" {
            return Ok(Accumulator::Exact);
        }
        let (bits, rule) = s.split_once(':').unwrap_or((s, "wrap"));
        let overflow = match rule {
            "wrap" => Overflow::Wrap,
            "saturate" => Overflow::Saturate,
            r => return Err(bad(format!("`{r}` is not wrap or saturate"))),
        };
        let bits: u32 = bits.parse().map_err(|_| {
            bad("expected `exact` or BITS[:wrap|saturate] with BITS in 2..=64".into())
        })?;
        Accumulator::narrow(bits, overflow).map_err(|e| match e {
            KernelError::Invalid { msg, .. } => bad(msg),
            e => e,
        })
    }
}
