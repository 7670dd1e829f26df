//! CPT's "progressive" comparison (Fig. 1): precision raised linearly from min to max over the
//! first half of training, then held at max. The ramp is rounded half-to-even like every other
//! schedule, so min and max get half a step each and every level in between a full step.

use super::BitRange;

/// Bits at iteration `t` of a `total`-iteration run.
pub fn bits(t: u64, total: u64, r: BitRange) -> u8 {
    let ramp = total / 2;
    if t >= ramp || ramp == 0 {
        return r.max;
    }
    let z = t as f64 / ramp as f64;
    r.round(f64::from(r.min) + f64::from(r.max - r.min) * z)
}

/// One past the last iteration of the monotone piece holding `t`: the ramp, then the rest.
pub fn piece_end(t: u64, total: u64) -> u64 {
    let ramp = total / 2;
    if t < ramp {
        ramp
    } else {
        total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ramps_over_the_first_half_then_holds() {
        let r = BitRange { min: 3, max: 8 };
        let got: Vec<u8> = [0, 3199, 3201, 16000, 31999, 32000, 63999]
            .iter()
            .map(|&t| bits(t, 64_000, r))
            .collect();
        // z = t/32000; 3 + 5z crosses 3.5 at t = 3200, 5.5 (tie → 6) at t = 16000.
        assert_eq!(got, [3, 3, 4, 6, 8, 8, 8]);
    }
}
