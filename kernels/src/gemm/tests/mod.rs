//! The GEMM against a plain reference on every vector path, shape, stride and operand form;
//! thread-count independence of the parallel splits.

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
fn fused_chain(a: ArrayView2<f32>, b: ArrayView2<f32>, c0: Option<&Array2<f32>>) -> Array2<f32> {
    Array2::from_shape_fn((a.nrows(), b.ncols()), |(i, j)| {
        let init = c0.map_or(0.0, |c| c[[i, j]]);
        (0..a.ncols()).fold(init, |c, p| a[[i, p]].mul_add(b[[p, j]], c))
    })
}

/// The paths this CPU runs; each other one is a printed skip.
fn paths() -> Vec<VectorPath> {
    for p in VectorPath::ALL.into_iter().filter(|p| !p.runs_here()) {
        cptsim_testdata::skip(&format!("the {} path: this CPU does not run it", p.name()));
    }
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
