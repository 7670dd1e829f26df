//! The seeded Fisher–Yates shuffle that orders both the training epochs ([`super::Loader`]) and
//! the validation split ([`super::Dataset::split_validation`]).

use rand::Rng;

/// Fisher–Yates shuffle driven by `rng`.
pub fn shuffle<T, R: Rng>(v: &mut [T], rng: &mut R) {
    for i in (1..v.len()).rev() {
        let j = rng.random_range(0..=i);
        v.swap(i, j);
    }
}
