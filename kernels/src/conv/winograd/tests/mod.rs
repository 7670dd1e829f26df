//! Winograd against the direct sums: forward and weight gradient across chunk edges, lanes and
//! both tile sizes, exact sums on integers, the padded input read as the plain one, and which
//! convs get which tile.

use super::*;
use crate::conv::testing::output_hw;
use crate::conv::Conv2dSpec;
use ndarray::Array2;

/// Deterministic values in [−1, 1), or integers in [−8, 8] when `int`.
fn values(n: usize, seed: u64, int: bool) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let u = (s >> 40) as f32 / (1u64 << 24) as f32;
            if int {
                (u * 17.0).floor() - 8.0
            } else {
                u * 2.0 - 1.0
            }
        })
        .collect()
}

/// The conv in f64, directly: `x` `[S, H, W, C]`, `b[(tap, c), o]`; with the sum of the
/// terms' magnitudes per output, for a rounding bound.
fn direct(geo: &Im2col<'_>, x: &[f32], b: &Array2<f32>) -> Vec<(f64, f64)> {
    let (c, o) = (geo.spec.in_channels, geo.spec.out_channels);
    let (oh, ow) = geo.out_hw;
    let mut out = Vec::new();
    for s in 0..x.len() / geo.in_per_sample() {
        for oy in 0..oh {
            for ox in 0..ow {
                for oi in 0..o {
                    let (mut acc, mut mag) = (0.0, 0.0);
                    for ky in 0..3 {
                        for kx in 0..3 {
                            let Some((iy, ix)) = geo.source(oy, ox, ky, kx) else {
                                continue;
                            };
                            for ci in 0..c {
                                let xv = x[((s * geo.in_hw.0 + iy) * geo.in_hw.1 + ix) * c + ci];
                                let t = xv as f64 * b[[(ky * 3 + kx) * c + ci, oi]] as f64;
                                acc += t;
                                mag += t.abs();
                            }
                        }
                    }
                    out.push((acc, mag));
                }
            }
        }
    }
    out
}

/// The conv's geometry on `hw` inputs, its input and output channels.
fn geometry(spec: &Conv2dSpec, hw: (usize, usize)) -> (Im2col<'_>, usize, usize) {
    let out_hw = output_hw(spec, hw.0, hw.1).unwrap();
    let geo = Im2col {
        spec,
        in_hw: hw,
        out_hw,
    };
    (geo, spec.in_channels, spec.out_channels)
}

/// Runs F(`tile`, 3×3) on `samples` random samples in chunks of `chunk` tiles.
fn run(
    tile: Tile,
    spec: &Conv2dSpec,
    hw: (usize, usize),
    samples: usize,
    chunk: usize,
    int: bool,
) -> (Vec<f32>, Vec<(f64, f64)>) {
    let (geo, c, o) = geometry(spec, hw);
    let x = values(samples * geo.in_per_sample(), 1, int);
    let b = Array2::from_shape_vec((9 * c, o), values(9 * c * o, 2, int)).unwrap();
    let u = weights(b.view(), c, tile).unwrap();
    assert!(weights(b.slice(ndarray::s![1.., ..]), c, tile).is_err());
    let mut y = vec![MaybeUninit::new(f32::NAN); samples * geo.rows_per_sample() * o];
    let y = forward_chunked("t", &geo, tile, &u, Input::Plain(&x), &mut y, chunk)
        .unwrap()
        .to_vec();
    (y, direct(&geo, &x, &b))
}

fn specs() -> Vec<(Conv2dSpec, (usize, usize))> {
    let mut lopsided = Conv2dSpec::square(9, 11, 3, 1, 0);
    lopsided.pads = [0, 2, 1, 0];
    vec![
        (Conv2dSpec::square(16, 8, 3, 1, 1), (8, 8)),
        // Channels off the 8 lanes, odd output height and width, asymmetric padding.
        (lopsided, (7, 5)),
        // No padding (a smaller output) and more padding (a larger one).
        (Conv2dSpec::square(8, 16, 3, 1, 0), (6, 7)),
        (Conv2dSpec::square(3, 5, 3, 1, 2), (3, 4)),
        // F(4×4): a width one past a whole tile, a height of one tile and a half.
        (Conv2dSpec::square(8, 8, 3, 1, 1), (6, 5)),
        // Wide, as ResNet-50's last stage: the products' reductions (264 channels) span
        // two blocks of the packed kernels; 7×7 outputs end inside a 4×4 tile.
        (Conv2dSpec::square(264, 12, 3, 1, 1), (7, 7)),
    ]
}

/// The weight gradient in f64, directly: `Σ g[s, y, x, o]·x[s, y + ky − pt, x + kx − pl, c]`
/// as `[o, (tap, c)]`, with the sum of the terms' magnitudes.
fn direct_weight_grad(geo: &Im2col<'_>, x: &[f32], g: &[f32]) -> Vec<(f64, f64)> {
    let (c, o) = (geo.spec.in_channels, geo.spec.out_channels);
    let (oh, ow) = geo.out_hw;
    let mut out = vec![(0.0, 0.0); o * 9 * c];
    for s in 0..x.len() / geo.in_per_sample() {
        for oy in 0..oh {
            for ox in 0..ow {
                for ky in 0..3 {
                    for kx in 0..3 {
                        let Some((iy, ix)) = geo.source(oy, ox, ky, kx) else {
                            continue;
                        };
                        for oi in 0..o {
                            let gv = g[((s * oh + oy) * ow + ox) * o + oi] as f64;
                            for ci in 0..c {
                                let xv = x[((s * geo.in_hw.0 + iy) * geo.in_hw.1 + ix) * c + ci];
                                let t = gv * xv as f64;
                                let e = &mut out[oi * 9 * c + (ky * 3 + kx) * c + ci];
                                e.0 += t;
                                e.1 += t.abs();
                            }
                        }
                    }
                }
            }
        }
    }
    out
}

/// The Winograd weight gradient of `samples` random samples in chunks of `chunk` tiles,
/// and the direct one.
fn run_weight_grad(
    spec: &Conv2dSpec,
    hw: (usize, usize),
    samples: usize,
    chunk: usize,
    int: bool,
) -> (Vec<f32>, Vec<(f64, f64)>) {
    let (geo, c, o) = geometry(spec, hw);
    let x = values(samples * geo.in_per_sample(), 3, int);
    let g = values(samples * geo.rows_per_sample() * o, 4, int);
    let mut dw = vec![f32::NAN; 9 * c * o];
    weight_grad_chunked("t", &geo, Input::Plain(&x), &g, &mut dw, chunk).unwrap();
    (dw, direct_weight_grad(&geo, &x, &g))
}

/// The forward pass by F(2×2) and F(4×4) and the weight gradient, each with its direct f64
/// sums.
type Runner = fn(&Conv2dSpec, (usize, usize), usize, usize, bool) -> (Vec<f32>, Vec<(f64, f64)>);
const RUNNERS: [(&str, Runner); 3] = [
    ("forward F(2×2)", |s, hw, n, k, i| {
        run(Tile::F2, s, hw, n, k, i)
    }),
    ("forward F(4×4)", |s, hw, n, k, i| {
        run(Tile::F4, s, hw, n, k, i)
    }),
    ("weight gradient", run_weight_grad),
];

#[test]
fn forward_and_weight_grad_match_the_direct_sums_across_chunks_edges_and_lanes() {
    for (what, run) in RUNNERS {
        for (spec, hw) in specs() {
            for chunk in [1, 5, 1000] {
                let (got, want) = run(&spec, hw, 3, chunk, false);
                assert_eq!(got.len(), want.len());
                for (i, (&got, &(v, mag))) in got.iter().zip(&want).enumerate() {
                    let err = (got as f64 - v).abs();
                    assert!(
                        err <= 1e-5 * mag.max(1.0),
                        "{what} {spec:?} chunk {chunk} value {i}: {got} vs {v}"
                    );
                }
            }
        }
    }
}

#[test]
fn integer_operands_give_the_exact_sums_with_2x2_tiles() {
    // F(2×2)'s transforms add, subtract and halve: on integers every intermediate is exact.
    for (what, run) in [RUNNERS[0], RUNNERS[2]] {
        for (spec, hw) in specs() {
            let (got, want) = run(&spec, hw, 2, 4, true);
            for (&got, &(v, _)) in got.iter().zip(&want) {
                assert_eq!(got, v as f32, "{what} {spec:?}");
            }
        }
    }
}

#[test]
fn weight_grad_reads_the_padded_input_as_the_plain_one() {
    let spec = Conv2dSpec::square(8, 16, 3, 1, 1);
    let geo = Im2col {
        spec: &spec,
        in_hw: (6, 4),
        out_hw: (6, 4),
    };
    assert!(weight_grad_applies(&Im2col {
        spec: &Conv2dSpec::square(32, 16, 3, 1, 1),
        ..geo
    }));
    let x = values(2 * geo.in_per_sample(), 5, false);
    let g = values(2 * geo.rows_per_sample() * 16, 6, false);
    let mut padded = vec![MaybeUninit::uninit(); geo.patch_scratch("t", 2).unwrap()];
    let padded = geo.pad_into("t", &x, &mut padded).unwrap();
    let (mut a, mut b) = (vec![0.0; 9 * 8 * 16], vec![1.0; 9 * 8 * 16]);
    weight_grad("t", &geo, Input::Plain(&x), &g, &mut a).unwrap();
    weight_grad("t", &geo, Input::Padded(padded), &g, &mut b).unwrap();
    assert_eq!(a, b);
    // An odd output: the padded layout is not the tiles', which is an error, not a guess.
    let odd = Im2col {
        in_hw: (5, 4),
        out_hw: (5, 4),
        ..geo
    };
    let err = weight_grad(
        "t",
        &odd,
        Input::Padded(&[0.0; 7 * 6 * 8]),
        &g[..160],
        &mut a,
    );
    assert!(err.unwrap_err().to_string().contains("padded input"));
}

#[test]
fn tiles_by_channels_for_undilated_one_group_3x3_convs() {
    let tile = |spec: &Conv2dSpec| {
        forward_tile(&Im2col {
            spec,
            in_hw: (8, 8),
            out_hw: (8, 8),
        })
    };
    assert_eq!(tile(&Conv2dSpec::square(16, 16, 3, 1, 1)), None);
    assert_eq!(tile(&Conv2dSpec::square(32, 16, 3, 1, 1)), Some(Tile::F4));
    assert_eq!(tile(&Conv2dSpec::square(64, 16, 3, 1, 1)), Some(Tile::F4));
    assert_eq!(tile(&Conv2dSpec::square(128, 16, 3, 1, 1)), Some(Tile::F4));
    assert_eq!(tile(&Conv2dSpec::square(512, 512, 3, 1, 1)), Some(Tile::F4));
    assert_eq!(tile(&Conv2dSpec::square(513, 512, 3, 1, 1)), None);
    assert_eq!(tile(&Conv2dSpec::square(64, 64, 3, 2, 1)), None);
    assert_eq!(tile(&Conv2dSpec::square(64, 64, 5, 1, 2)), None);
    let mut dilated = Conv2dSpec::square(64, 64, 3, 1, 2);
    dilated.dilation = [2, 2];
    assert_eq!(tile(&dilated), None);
    let mut grouped = Conv2dSpec::square(64, 64, 3, 1, 1);
    grouped.groups = 2;
    assert_eq!(tile(&grouped), None);
}
