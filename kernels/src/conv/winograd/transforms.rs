//! The Winograd transforms, lane-wise over channels ([`lanewise`]): the kernel's `G·g·Gᵀ`,
//! the input tiles' `Bᵀ·d·B`, the output tiles' `Aᵀ·M·A`, and for the weight gradient the
//! output gradient's `A·δ·Aᵀ` and the kernel gradient's `Gᵀ·dU·G`.

use std::mem::MaybeUninit;

use super::{Input, Tile, Tiling, G4, SKEW};
use crate::conv::im2col::Im2col;
use crate::conv::lanes::{lanewise, uninit, Formula, Lane};
use crate::gemm::PANEL;

crate::simd::multiversion! {
/// Panel `p` (output channels `p·PANEL..`, zero past `o`) of every position's `U`, one row per
/// input channel: the taps of the panel's channels gathered from `w` (`[o][tap][c]`) as 9
/// matrices shaped like a panel, then [`Kernel`] lane by lane.
pub(super) fn kernel_panel(tile: Tile, w: &[f32], c: usize, o: usize, p: usize, panels: &mut [&mut [f32]]) {
    let len = c * PANEL;
    let mut g = vec![0.0f32; 9 * len];
    for (l, oi) in (p * PANEL..o.min((p + 1) * PANEL)).enumerate() {
        let taps = &w[oi * 9 * c..(oi + 1) * 9 * c];
        for (gt, taps) in g.chunks_exact_mut(len).zip(taps.chunks_exact(c)) {
            for (ci, &v) in taps.iter().enumerate() {
                gt[ci * PANEL + l] = v;
            }
        }
    }
    let mut ins: [&[f32]; 9] = [&[]; 9];
    for (i, g) in ins.iter_mut().zip(g.chunks_exact(len)) {
        *i = g;
    }
    match tile {
        Tile::F2 => kernel_lanes::<Kernel<G2>, 16>(panels, ins),
        Tile::F4 => kernel_lanes::<Kernel<G4Rows>, 36>(panels, ins),
    }
}
}

/// The kernel transform `F` from the 9 taps' matrices `ins` into the first `M` of `panels`.
#[inline(always)]
fn kernel_lanes<F: Formula<9, M>, const M: usize>(panels: &mut [&mut [f32]], ins: [&[f32]; 9]) {
    let mut panels = panels.iter_mut();
    let out = std::array::from_fn(|_| uninit(panels.next().map_or(&mut [][..], |p| &mut p[..])));
    lanewise::<F, 9, M>(out, ins);
}

/// A tile's `G`, by rows: row `i` of `G·[g0, g1, g2]`.
trait GRows {
    /// Rows of `G` (positions per side).
    const SIDE: usize;
    fn row<T: Lane>(i: usize, g: [T; 3]) -> T;
}

/// F(2×2)'s `G`: `g0, (g0 + g1 + g2)/2, (g0 − g1 + g2)/2, g2`.
struct G2;
impl GRows for G2 {
    const SIDE: usize = 4;
    #[inline(always)]
    fn row<T: Lane>(i: usize, [g0, g1, g2]: [T; 3]) -> T {
        match i {
            0 => g0,
            1 => (g0 + g1 + g2) * 0.5,
            2 => (g0 - g1 + g2) * 0.5,
            _ => g2,
        }
    }
}

/// F(4×4)'s `G` as [`G4`]'s rows: multiplies by constants, no division.
struct G4Rows;
impl GRows for G4Rows {
    const SIDE: usize = 6;
    #[inline(always)]
    fn row<T: Lane>(i: usize, [g0, g1, g2]: [T; 3]) -> T {
        let gi = G4[i];
        (g0 * gi[0] + g1 * gi[1]) + g2 * gi[2]
    }
}

/// `G·g·Gᵀ` of the 9 taps (row-major) into the `M = SIDE²` positions (row-major): by rows of
/// `G·g` down each column of taps, then along them.
struct Kernel<R>(std::marker::PhantomData<R>);

/// [`Kernel`]'s formula for any tile.
#[inline(always)]
#[allow(
    clippy::needless_range_loop,
    reason = "index loops, no iterator adapters"
)]
fn kernel_transform<R: GRows, T: Lane, const M: usize>(g: [T; 9]) -> [T; M] {
    let mut u = [g[0]; M];
    for i in 0..R::SIDE {
        let mut a = [g[0]; 3];
        for kx in 0..3 {
            a[kx] = R::row(i, [g[kx], g[3 + kx], g[6 + kx]]);
        }
        for j in 0..R::SIDE {
            u[i * R::SIDE + j] = R::row(j, a);
        }
    }
    u
}

impl Formula<9, 16> for Kernel<G2> {
    #[inline(always)]
    fn apply<T: Lane>(g: [T; 9]) -> [T; 16] {
        kernel_transform::<G2, T, 16>(g)
    }
}

impl Formula<9, 36> for Kernel<G4Rows> {
    #[inline(always)]
    fn apply<T: Lane>(g: [T; 9]) -> [T; 36] {
        kernel_transform::<G4Rows, T, 36>(g)
    }
}

/// `d = a − b`, elementwise.
#[inline(always)]
fn sub(d: &mut [f32], a: &[f32], b: &[f32]) {
    d.iter_mut()
        .zip(a)
        .zip(b)
        .for_each(|((d, a), b)| *d = a - b);
}

/// `d = a + b`, elementwise.
#[inline(always)]
fn add(d: &mut [f32], a: &[f32], b: &[f32]) {
    d.iter_mut()
        .zip(a)
        .zip(b)
        .for_each(|((d, a), b)| *d = a + b);
}

/// `Bᵀ·d` of F(4×4): `4d0 − 5d2 + d4`, `(d4 − 4d2) ± (d3 − 4d1)`, `(d4 − d2) ± 2(d3 − d1)`,
/// `4d1 − 5d3 + d5`.
struct Input4;
impl Formula<6, 6> for Input4 {
    #[inline(always)]
    fn apply<T: Lane>([d0, d1, d2, d3, d4, d5]: [T; 6]) -> [T; 6] {
        let (t1, t2) = (d4 - d2 * 4.0, d3 - d1 * 4.0);
        let (t3, t4) = (d4 - d2, (d3 - d1) * 2.0);
        [
            (d0 * 4.0 - d2 * 5.0) + d4,
            t1 + t2,
            t1 - t2,
            t3 + t4,
            t3 - t4,
            (d1 * 4.0 - d3 * 5.0) + d5,
        ]
    }
}

/// `Aᵀ·m` of F(4×4), with `s = m1 + m2, d = m1 − m2, S = m3 + m4, D = m3 − m4`:
/// `(m0 + s) + S, d + 2D, s + 4S, (d + 8D) + m5`.
struct Output4;
impl Formula<6, 4> for Output4 {
    #[inline(always)]
    fn apply<T: Lane>([m0, m1, m2, m3, m4, m5]: [T; 6]) -> [T; 4] {
        let (s, d) = (m1 + m2, m1 - m2);
        let (bs, bd) = (m3 + m4, m3 - m4);
        [
            (m0 + s) + bs,
            d + bd * 2.0,
            s + bs * 4.0,
            (d + bd * 8.0) + m5,
        ]
    }
}

/// `Bᵀ·d` along one axis, lane by lane, for `tile`: the first `side` slices of `out` from the
/// first `side` of `ins` (the rest are empty).
/// F(2×2): `a − c, b + c, c − b, b − d`, an output at a time over the whole slices (they run
/// over ≥ 32 channels); F(4×4): [`Input4`] by groups of lanes.
#[inline(always)]
fn input_axis(tile: Tile, out: [&mut [f32]; 6], ins: [&[f32]; 6]) {
    let [o0, o1, o2, o3, o4, o5] = out;
    let [d0, d1, d2, d3, d4, d5] = ins;
    match tile {
        Tile::F2 => {
            sub(o0, d0, d2);
            add(o1, d1, d2);
            sub(o2, d2, d1);
            sub(o3, d1, d3);
        }
        Tile::F4 => {
            let out = [
                uninit(o0),
                uninit(o1),
                uninit(o2),
                uninit(o3),
                uninit(o4),
                uninit(o5),
            ];
            lanewise::<Input4, 6, 6>(out, [d0, d1, d2, d3, d4, d5]);
        }
    }
}

/// `Aᵀ·m` along one axis, lane by lane, for `tile`: the first `m` slices of `out` from the
/// first `side` of `ins`. F(2×2): `(a + b) + c, (b − c) − d` over the whole
/// slices; F(4×4): [`Output4`] by groups of lanes.
#[inline(always)]
fn output_axis(tile: Tile, out: [&mut [MaybeUninit<f32>]; 6], ins: [&[f32]; 6]) {
    let [o0, o1, o2, o3, ..] = out;
    let [m0, m1, m2, m3, m4, m5] = ins;
    match tile {
        Tile::F2 => {
            for (((o, a), b), c) in o0.iter_mut().zip(m0).zip(m1).zip(m2) {
                o.write((a + b) + c);
            }
            for (((o, b), c), d) in o1.iter_mut().zip(m1).zip(m2).zip(m3) {
                o.write((b - c) - d);
            }
        }
        Tile::F4 => lanewise::<Output4, 6, 4>([o0, o1, o2, o3], [m0, m1, m2, m3, m4, m5]),
    }
}

/// The first `n ≤ 6` chunks of `len` values of `s`, the rest empty: a tile's rows or positions
/// without an allocation. (A plain loop: iterator adapters such as `Zip` and `Chain` were left
/// out of line in the AVX2 copies of the transforms, a call per tile.)
#[inline(always)]
fn chunks6<T>(s: &mut [T], len: usize, n: usize) -> [&mut [T]; 6] {
    let mut r: [&mut [T]; 6] = Default::default();
    let mut rest = s;
    for r in r.iter_mut().take(n) {
        let (a, b) = std::mem::take(&mut rest).split_at_mut(len);
        *r = a;
        rest = b;
    }
    r
}

crate::simd::multiversion! {
/// Writes `Bᵀ·d·B` of tiles `t0..t0 + nt` of `x` into `v` (`[ξ][tile][c]`, positions
/// `nt·c + SKEW` apart): `Bᵀ` along the height once per row of tiles, for the whole padded width
/// (into `e`: the transformed rows; zeros where the padding is), then `B` along the width per
/// tile. Rows and columns of the padding are read as zeros without being copied.
pub(super) fn transform_input(geo: &Im2col<'_>, tiling: &Tiling, x: &Input<'_>, t0: usize, nt: usize, v: &mut [f32]) {
    let c = geo.spec.in_channels;
    let (m, side) = (tiling.tile.m(), tiling.tile.side());
    let row = tiling.wp * c;
    let sv = nt * c + SKEW;
    let (h, w) = geo.in_hw;
    let (pt, pl) = (geo.spec.pads[0], geo.spec.pads[1]);
    // Padded columns `lo..hi` hold input, the rest zeros.
    let (lo, hi) = match x {
        Input::Plain(_) => (pl.min(tiling.wp), (pl + w).min(tiling.wp)),
        Input::Padded(_) => (0, tiling.wp),
    };
    let zeros = vec![0.0f32; (hi - lo) * c];
    let mut e = vec![0.0f32; side * row];
    // The positions' matrices (their skew left out), by position row.
    let mut pos = position_rows(v, sv, nt * c, side);
    let mut t = 0;
    while t < nt {
        // The tiles of one row of tiles: `Bᵀ` along the height for the row, then per position
        // row `i` of `e`, `B` along the width tile by tile.
        let (s, ty, tx0) = tiling.of(t0 + t);
        let run = (tiling.tw - tx0).min(nt - t);
        // Padded row m·ty + i, columns lo..hi.
        let rows: [&[f32]; 6] = std::array::from_fn(|i| {
            let py = m * ty + i;
            match x {
                _ if i >= side => &[][..],
                Input::Padded(xp) => {
                    let at = (s * tiling.hp + py) * row;
                    &xp[at..at + row]
                }
                Input::Plain(xs) => match py.checked_sub(pt).filter(|&iy| iy < h) {
                    Some(iy) => {
                        let at = (s * h + iy) * w * c;
                        &xs[at..at + (hi - lo) * c]
                    }
                    None => &zeros[..],
                },
            }
        });
        let mut out = chunks6(&mut e, row, side);
        for r in &mut out[..side] {
            r[..lo * c].fill(0.0);
            r[hi * c..].fill(0.0);
            *r = &mut std::mem::take(r)[lo * c..hi * c];
        }
        input_axis(tiling.tile, out, rows);
        for (i, prow) in pos.iter_mut().enumerate() {
            for k in 0..run {
                let at = i * row + m * (tx0 + k) * c;
                let p = &e[at..at + side * c];
                let mut d: [&[f32]; 6] = [&[]; 6];
                for (d, p) in d.iter_mut().zip(p.chunks_exact(c.max(1))) {
                    *d = p;
                }
                let r = (t + k) * c..(t + k + 1) * c;
                let mut o: [&mut [f32]; 6] = Default::default();
                for (j, q) in prow[..side].iter_mut().enumerate() {
                    o[j] = &mut q[r.clone()];
                }
                input_axis(tiling.tile, o, d);
            }
        }
        t += run;
    }
}
}

/// The positions' matrices of a chunk (`stride` apart in `s`, each cut to `len` values) as
/// `side` rows of `side` (the rest of each row's 6 slots empty).
fn position_rows(s: &mut [f32], stride: usize, len: usize, side: usize) -> Vec<[&mut [f32]; 6]> {
    s.chunks_exact_mut(side * stride)
        .map(|row| {
            let mut r = chunks6(row, stride, side);
            for p in &mut r {
                let p_len = len.min(p.len());
                *p = &mut std::mem::take(p)[..p_len];
            }
            r
        })
        .collect()
}

/// The first four chunks of `len` values of `s`.
fn split4(s: &mut [f32], len: usize) -> [&mut [f32]; 4] {
    let (a, r) = s.split_at_mut(len);
    let (b, r) = r.split_at_mut(len);
    let (c, r) = r.split_at_mut(len);
    [a, b, c, &mut r[..len]]
}

crate::simd::multiversion! {
/// Writes `Aᵀ·m·A` of tiles `t0..t0 + nt` (`m`: `[ξ][tile][o]`, positions `nt·o + SKEW` apart)
/// into the outputs they cover: `Aᵀ` along the height into `f` (a tile's side of columns of
/// `m` rows each), then `A` along the width into `y`.
pub(super) fn transform_output(
    geo: &Im2col<'_>,
    tiling: &Tiling,
    m: &[f32],
    t0: usize,
    nt: usize,
    y: &mut [MaybeUninit<f32>],
) {
    let o = geo.spec.out_channels;
    let (oh, ow) = geo.out_hw;
    let (tm, side) = (tiling.tile.m(), tiling.tile.side());
    let sm = nt * o + SKEW;
    let mut f = vec![0.0f32; side * tm * o];
    let mut spare = vec![MaybeUninit::new(0.0f32); tm * o];
    for t in 0..nt {
        let (s, ty, tx) = tiling.of(t0 + t);
        let mt = |xi: usize| &m[xi * sm + t * o..xi * sm + (t + 1) * o];
        // Column j of the tile's positions into rows `j·tm..(j + 1)·tm` of `f`.
        for (j, fj) in f.chunks_exact_mut(tm * o).enumerate() {
            let mut col: [&[f32]; 6] = [&[]; 6];
            for (i, col) in col.iter_mut().enumerate().take(side) {
                *col = mt(i * side + j);
            }
            output_axis(tiling.tile, chunks6(uninit(fj), o, tm), col);
        }
        // Outputs past the width (the last tile of an odd or short row) go to `spare`.
        let cols = (ow - tm * tx).min(tm);
        for a in 0..tm {
            let oy = tm * ty + a;
            if oy >= oh {
                break;
            }
            let mut row: [&[f32]; 6] = [&[]; 6];
            for (j, row) in row.iter_mut().enumerate().take(side) {
                *row = &f[(j * tm + a) * o..(j * tm + a + 1) * o];
            }
            let at = ((s * oh + oy) * ow + tm * tx) * o;
            let mut out = chunks6(&mut y[at..], o, cols);
            let mut rest = chunks6(&mut spare, o, tm - cols);
            out[cols..tm].swap_with_slice(&mut rest[..tm - cols]);
            output_axis(tiling.tile, out, row);
        }
    }
}
}

/// `A·[p, q]` along one axis, lane by lane: `p, p + q, p − q, −q`.
#[inline(always)]
fn grad_axis(out: [&mut [f32]; 4], [p, q]: [&[f32]; 2]) {
    let [o0, o1, o2, o3] = out;
    o0.copy_from_slice(p);
    add(o1, p, q);
    sub(o2, p, q);
    o3.iter_mut().zip(q).for_each(|(d, q)| *d = -q);
}

/// `Gᵀ·[a, b, c, d]` along one axis, lane by lane: `a + (b + c)/2, (b − c)/2, (b + c)/2 + d`.
#[inline(always)]
fn kernel_axis(out: [&mut [f32]; 3], [a, b, c, d]: [&[f32]; 4]) {
    let [o0, o1, o2] = out;
    for (((o, a), b), c) in o0.iter_mut().zip(a).zip(b).zip(c) {
        *o = a + (b + c) * 0.5;
    }
    for ((o, b), c) in o1.iter_mut().zip(b).zip(c) {
        *o = (b - c) * 0.5;
    }
    for (((o, b), c), d) in o2.iter_mut().zip(b).zip(c).zip(d) {
        *o = (b + c) * 0.5 + d;
    }
}

/// The first three chunks of `len` values of `s`.
fn split3(s: &mut [f32], len: usize) -> [&mut [f32]; 3] {
    let (a, r) = s.split_at_mut(len);
    let (b, r) = r.split_at_mut(len);
    [a, b, &mut r[..len]]
}

crate::simd::multiversion! {
/// Writes `A·δ·Aᵀ` of the output gradient `g` of tiles `t0..t0 + nt` into `m` (`[ξ][tile][o]`,
/// positions `nt·o + SKEW` apart): `A` along the height per column of the tile into `r`, then
/// `Aᵀ` along the width. Outputs past an odd height or width count as zeros.
pub(super) fn transform_output_grad(geo: &Im2col<'_>, tiling: &Tiling, g: &[f32], t0: usize, nt: usize, m: &mut [f32]) {
    let o = geo.spec.out_channels;
    let (oh, ow) = geo.out_hw;
    let sm = nt * o + SKEW;
    let zeros = vec![0.0f32; o];
    // r[b][i]: row i of A·δ in column b of the tile.
    let mut r = vec![0.0f32; 8 * o];
    // The 16 positions' matrices (their skew left out), by position row.
    let mut pos = position_rows(m, sm, nt * o, 4);
    for t in 0..nt {
        let (s, ty, tx) = tiling.of(t0 + t);
        let at = |a: usize, b: usize| {
            let (y, x) = (2 * ty + a, 2 * tx + b);
            if y < oh && x < ow {
                let i = ((s * oh + y) * ow + x) * o;
                &g[i..i + o]
            } else {
                &zeros[..]
            }
        };
        for b in 0..2 {
            grad_axis(split4(&mut r[b * 4 * o..(b + 1) * 4 * o], o), [at(0, b), at(1, b)]);
        }
        let to = t * o..(t + 1) * o;
        for (i, [a, b, cc, dd, ..]) in pos.iter_mut().enumerate() {
            let (p, q) = (&r[i * o..(i + 1) * o], &r[(4 + i) * o..(5 + i) * o]);
            grad_axis(
                [&mut a[to.clone()], &mut b[to.clone()], &mut cc[to.clone()], &mut dd[to.clone()]],
                [p, q],
            );
        }
    }
}
}

crate::simd::multiversion! {
/// Writes `Gᵀ·dU·G` for every output channel into `dw` (`[O, (tap, C)]`) from `du`
/// (`[ξ][o][c]`, positions `su` apart): `Gᵀ` along the width into `h` (4 rows of 3 taps), then
/// `G` along the height.
pub(super) fn transform_kernel_grad(du: &[f32], su: usize, o: usize, c: usize, dw: &mut [f32]) {
    let mut h = vec![0.0f32; 12 * c];
    for oi in 0..o {
        let d = |xi: usize| &du[xi * su + oi * c..xi * su + (oi + 1) * c];
        for i in 0..4 {
            kernel_axis(split3(&mut h[i * 3 * c..(i + 1) * 3 * c], c), [d(4 * i), d(4 * i + 1), d(4 * i + 2), d(4 * i + 3)]);
        }
        let row = &mut dw[oi * 9 * c..(oi + 1) * 9 * c];
        let [r0, r1, r2] = split3(row, 3 * c);
        for kx in 0..3 {
            let hk = |i: usize| &h[(i * 3 + kx) * c..(i * 3 + kx + 1) * c];
            kernel_axis(
                [&mut r0[kx * c..(kx + 1) * c], &mut r1[kx * c..(kx + 1) * c], &mut r2[kx * c..(kx + 1) * c]],
                [hk(0), hk(1), hk(2), hk(3)],
            );
        }
    }
}
}
