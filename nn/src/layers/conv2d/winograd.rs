//! Winograd's minimal filtering F(m×m, 3×3) for 3×3 convs at stride 1 (Lavin & Gray, 2016):
//! each m×m block of outputs ("tile") is `Aᵀ·[(G·g·Gᵀ) ⊙ (Bᵀ·d·B)]·A` of its (m+2)×(m+2) input
//! patch `d` and the kernel `g`. Summed over channels, the elementwise products become (m+2)²
//! GEMMs `M[ξ] = V[ξ]·U[ξ]`, one per position ξ of the transformed tile, with the tiles as rows.
//! Two sizes ([`Tile`]): F(2×2, 3×3), 16 multiplies per channel pair and tile of 4 outputs
//! instead of 36 (2.25× fewer), and F(4×4, 3×3), 36 per tile of 16 outputs instead of 144 (4×).
//!
//! The weight gradient (F(2×2, 3×3) only) is the transpose of that map in the kernel:
//! `Gᵀ·[Σ_tiles (Bᵀ·d·B) ⊙ (A·δ·Aᵀ)]·G` for each tile's 2×2 output gradient `δ`, again 16
//! products per chunk of tiles, `dU[ξ] += (A·δ·Aᵀ)[ξ]ᵀ·V[ξ]` with the tiles as the summed
//! dimension.
//!
//! F(2×2)'s transforms only add, subtract and halve, so on integer-valued operands (quantized
//! values on a power-of-two grid) its result is as exact as the direct product; on general floats
//! it differs from it by rounding (reassociation and the halving of the kernel's sums). F(4×4)'s
//! kernel transform divides by 6 and 24, so it rounds even on integers; its error against the
//! direct product is larger (tested below against f64 sums). Every sum has a fixed order, so the
//! numbers are the same on every vector path and thread count.

use std::mem::MaybeUninit;

use ndarray::{ArrayView2, ArrayViewMut2};
use rayon::prelude::*;

use super::im2col::Im2col;
use super::lanes::{lanewise, uninit, Formula, Lane};
use super::{shape_err, with_scratch};
use crate::error::Result;
use cptsim_kernels::gemm::{
    matmul_winograd_into, matmul_winograd_uninit, PackedB, PANEL, ROW_TILE,
};

/// The size of a Winograd tile: outputs per side.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Tile {
    /// F(2×2, 3×3): 4×4 transformed positions.
    F2,
    /// F(4×4, 3×3): 6×6 transformed positions.
    F4,
}

impl Tile {
    /// Outputs per side of a tile.
    fn m(self) -> usize {
        match self {
            Tile::F2 => 2,
            Tile::F4 => 4,
        }
    }

    /// Input pixels per side of a tile's patch (and transformed positions per side).
    fn side(self) -> usize {
        self.m() + 2
    }

    /// Positions of a transformed tile.
    fn pos(self) -> usize {
        self.side() * self.side()
    }
}

/// Floats of transformed input (and of products) per chunk of tiles, at most: 1 MiB, which
/// holds a whole block of tiles (1 024 outputs, 256 tiles) of up to 64 channels. Smaller
/// chunks keep them in L2 but give the GEMMs too few rows (measured on ResNet-20 eval: chunks
/// of 256 KiB ran 5–10 % slower).
const CHUNK_FLOATS: usize = 1 << 18;
/// Input channels of the F(2×2) weight gradient. Below 32, the 16-term products run too far
/// below the FMA peak and the transforms cost too much per multiply saved (with ResNet-20's
/// 16-channel convs as well, its training step ran 223–239 img/CPU-s against 284–292); above
/// 256 it is not measured.
const F2_CHANNELS: std::ops::RangeInclusive<usize> = 32..=256;
/// Input channels of the forward pass by F(4×4). Below 32 it lost to the direct conv (ResNet-20
/// eval with its 16-channel convs as well: 780–845 img/CPU-s against 1000–1115). Up to 512 it
/// beat F(2×2) on ResNet-50 eval (batch 16, one thread, 3 interleaved rounds: 11.7–12.1 img/s
/// against 9.4–11.2 with F(2×2) for 65–512 channels, 10.0–10.9 with 65–256 by F(2×2) and 512 by
/// the direct conv). F(2×2)'s forward pass stays for comparison and its tests.
const F4_CHANNELS: std::ops::RangeInclusive<usize> = 32..=512;
/// Fewest tiles per chunk of a forward pass (as many as the block has, when fewer): each
/// product reads its `C × O` kernel matrix once for the chunk's rows, so for wide convs a chunk
/// of [`CHUNK_FLOATS`] (28 F(4×4) tiles of 256 channels) reread the kernels from L3 every few
/// rows. The chunk's transformed input then outgrows L2, which costs less.
const MIN_CHUNK_TILES: usize = 128;
/// Floats between consecutive positions' matrices beyond their size: without it the
/// matrices of a chunk lie a multiple of 4 KiB apart, and the transforms' reads or writes per
/// tile all fall into one L1 set.
const SKEW: usize = 16;

/// True for a one-group 3×3 kernel at stride 1, undilated.
fn is_3x3_unit(geo: &Im2col<'_>) -> bool {
    let sp = geo.spec;
    sp.kernel == [3, 3] && sp.stride == [1, 1] && sp.dilation == [1, 1] && sp.groups == 1
}

/// The tile by which the conv's forward pass runs, if Winograd computes it and is faster for it:
/// F(4×4) for 32–512 input channels ([`F4_CHANNELS`]).
pub(super) fn forward_tile(geo: &Im2col<'_>) -> Option<Tile> {
    (is_3x3_unit(geo) && F4_CHANNELS.contains(&geo.spec.in_channels)).then_some(Tile::F4)
}

/// True when the weight gradient runs by F(2×2, 3×3): a 3×3 unit-stride conv of 32–256 input
/// channels, on the input a training pass keeps (padded when the spec pads, [`reads_padded`]).
pub(super) fn weight_grad_applies(geo: &Im2col<'_>) -> bool {
    is_3x3_unit(geo)
        && F2_CHANNELS.contains(&geo.spec.in_channels)
        && (geo.spec.pads == [0; 4] || reads_padded(geo, Tile::F2))
}

/// `G` of F(4×4) (6 × 3), by rows: `[1/4, 0, 0], −[1, 1, 1]/6, −[1, −1, 1]/6, [1, 2, 4]/24,
/// [1, −2, 4]/24, [0, 0, 1]` (thirds and sixths rounded to f32).
const G4: [[f32; 3]; 6] = [
    [0.25, 0.0, 0.0],
    [-1.0 / 6.0, -1.0 / 6.0, -1.0 / 6.0],
    [-1.0 / 6.0, 1.0 / 6.0, -1.0 / 6.0],
    [1.0 / 24.0, 1.0 / 12.0, 1.0 / 6.0],
    [1.0 / 24.0, -1.0 / 12.0, 1.0 / 6.0],
    [0.0, 0.0, 1.0],
];

/// The kernels as the matrices `U[ξ] = (G·g·Gᵀ)[ξ]` of `[C, O]`, one per position ξ, packed as
/// the products read them ([`PackedB`]), from the conv's GEMM operand `b[(tap, c), o]` (taps
/// row-major over the 3×3 kernel). Packed once per pass: read in place, a kernel of 256 channels
/// (rows 1 KiB apart) fell into a few L1 sets, and one of 512 was packed again by every product.
/// Written straight into the panels, [`PANEL`] output channels a vector formula at a time.
pub(super) fn weights(b: ArrayView2<f32>, c: usize, tile: Tile) -> Result<Vec<PackedB>> {
    let o = b.ncols();
    // Row `oi` of `w`: the taps of output channel `oi`, `[tap][c]`.
    let bt = b.t();
    let w = bt.as_standard_layout();
    let w = w.as_slice().unwrap_or_default();
    if b.nrows() != 9 * c || w.len() != 9 * c * o {
        return Err(crate::error::SimError::shape(
            "winograd",
            format!(
                "a 3×3 kernel of {c} input channels has {} rows of taps",
                b.nrows()
            ),
        ));
    }
    let per_panel = c * PANEL;
    let mut u = vec![vec![0.0f32; o.div_ceil(PANEL) * per_panel]; tile.pos()];
    // The panels of every position, by panel: one task each.
    let mut by_panel: Vec<Vec<&mut [f32]>> = Vec::new();
    for ux in &mut u {
        for (p, panel) in ux.chunks_exact_mut(per_panel.max(1)).enumerate() {
            if by_panel.len() <= p {
                by_panel.push(Vec::with_capacity(tile.pos()));
            }
            by_panel[p].push(panel);
        }
    }
    by_panel
        .into_par_iter()
        .enumerate()
        .for_each(|(p, mut panels)| kernel_panel(tile, w, c, o, p, &mut panels));
    u.into_iter()
        .map(|ux| Ok(PackedB::from_panels(ux, c, o)?))
        .collect::<Result<_>>()
}

cptsim_kernels::simd::multiversion! {
/// Panel `p` (output channels `p·PANEL..`, zero past `o`) of every position's `U`, one row per
/// input channel: the taps of the panel's channels gathered from `w` (`[o][tap][c]`) as 9
/// matrices shaped like a panel, then [`Kernel`] lane by lane.
fn kernel_panel(tile: Tile, w: &[f32], c: usize, o: usize, p: usize, panels: &mut [&mut [f32]]) {
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

/// Where tiles lie: `th × tw` tiles of `m × m` outputs per sample, read from the input padded to
/// `hp × wp` pixels (the spec's padding at the top and left, zeros to `m·th + 2` rows and
/// `m·tw + 2` columns).
struct Tiling {
    tile: Tile,
    th: usize,
    tw: usize,
    hp: usize,
    wp: usize,
}

impl Tiling {
    fn new(geo: &Im2col<'_>, tile: Tile) -> Self {
        let m = tile.m();
        let (th, tw) = (geo.out_hw.0.div_ceil(m), geo.out_hw.1.div_ceil(m));
        Self {
            tile,
            th,
            tw,
            hp: m * th + 2,
            wp: m * tw + 2,
        }
    }

    /// `(sample, tile row, tile column)` of tile `t`.
    fn of(&self, t: usize) -> (usize, usize, usize) {
        let per = self.th * self.tw;
        (t / per, (t % per) / self.tw, t % self.tw)
    }
}

/// A block of samples as the conv has them.
pub(super) enum Input<'a> {
    /// `[S, H, W, C]` as they lie.
    Plain(&'a [f32]),
    /// Padded as [`Im2col::pad_into`] writes them, where that is the layout the tiles read
    /// ([`reads_padded`]).
    Padded(&'a [f32]),
}

/// True when the spec's padded input ([`Im2col::pad_into`]) is the layout `tile`'s tiles read:
/// an output whose height and width are multiples of the tile's, so the tiles end where the
/// padding does.
pub(super) fn reads_padded(geo: &Im2col<'_>, tile: Tile) -> bool {
    let t = Tiling::new(geo, tile);
    (t.hp, t.wp) == geo.padded_hw()
}

/// The conv of the samples in `x` with the transformed kernels `u` ([`weights`] for `tile`)
/// written into `y` (`[S, OH, OW, O]`, uninitialised); returns `y`, every value written.
pub(super) fn forward<'y>(
    layer: &str,
    geo: &Im2col<'_>,
    tile: Tile,
    u: &[PackedB],
    x: Input<'_>,
    y: &'y mut [MaybeUninit<f32>],
) -> Result<&'y mut [f32]> {
    let tiling = Tiling::new(geo, tile);
    let samples = samples_of(geo, &tiling, &x).ok_or_else(|| not_tiled(layer))?;
    let chunk = forward_chunk(geo, tile, samples * tiling.th * tiling.tw);
    forward_chunked(layer, geo, tile, u, x, y, chunk)
}

/// Tiles per chunk of a forward pass over `tiles` tiles: as many chunks as [`chunk_tiles`] (but
/// at least [`MIN_CHUNK_TILES`]) needs, of equal size (but the last), so no product is left
/// with a few rows. (Each output row is summed alike in any chunk, so this changes no value.)
fn forward_chunk(geo: &Im2col<'_>, tile: Tile, tiles: usize) -> usize {
    let most = chunk_tiles(geo, tile).max(MIN_CHUNK_TILES);
    tiles.div_ceil(tiles.div_ceil(most).max(1)).max(1)
}

/// Samples per block of work for `tile`: the conv's usual [`Im2col::samples_per_block`] without
/// one, a multiple of it with one. F(4×4)'s tiles hold 4× the outputs of F(2×2)'s, so where a
/// usual block is at most [`ROW_TILE`] output rows it takes 4× the samples and its products keep
/// as many rows (with one sample per block, a 32×32 output gives F(4×4) products of 64 rows).
pub(super) fn samples_per_block(geo: &Im2col<'_>, tile: Option<Tile>) -> usize {
    let spb = geo.samples_per_block();
    match tile {
        Some(Tile::F4) if spb * geo.rows_per_sample() <= ROW_TILE => 4 * spb,
        _ => spb,
    }
}

/// Tiles per chunk ([`CHUNK_FLOATS`]).
fn chunk_tiles(geo: &Im2col<'_>, tile: Tile) -> usize {
    let (c, o) = (geo.spec.in_channels, geo.spec.out_channels);
    (CHUNK_FLOATS / (tile.pos() * c.max(o))).max(16)
}

/// The GEMMs [`forward`] runs on a block of `samples` samples: `([tiles, C, O], count)`, one
/// per position and chunk of tiles.
pub(super) fn products(geo: &Im2col<'_>, tile: Tile, samples: usize) -> Vec<([usize; 3], usize)> {
    let t = Tiling::new(geo, tile);
    let tiles = samples * t.th * t.tw;
    let chunk = forward_chunk(geo, tile, tiles);
    let (c, o) = (geo.spec.in_channels, geo.spec.out_channels);
    chunks_of(tiles, chunk)
        .map(|(rows, n)| ([rows, c, o], tile.pos() * n))
        .collect()
}

/// `tiles` in chunks of `chunk`: `(tiles per chunk, chunks)` of the full chunks and the rest.
fn chunks_of(tiles: usize, chunk: usize) -> impl Iterator<Item = (usize, usize)> {
    [(chunk, tiles / chunk.max(1)), (tiles % chunk.max(1), 1)]
        .into_iter()
        .filter(|&(rows, n)| rows > 0 && n > 0)
}

/// The GEMMs [`weight_grad`] runs on a block of `samples` samples: `([O, tiles, C], count)`, 16
/// per chunk of tiles.
pub(super) fn weight_products(geo: &Im2col<'_>, samples: usize) -> Vec<([usize; 3], usize)> {
    let t = Tiling::new(geo, Tile::F2);
    let (tiles, chunk) = (samples * t.th * t.tw, chunk_tiles(geo, Tile::F2));
    let (c, o) = (geo.spec.in_channels, geo.spec.out_channels);
    chunks_of(tiles, chunk)
        .map(|(rows, n)| ([o, rows, c], Tile::F2.pos() * n))
        .collect()
}

/// Samples in `x` (`None` when it is padded in a layout the tiles do not read).
fn samples_of(geo: &Im2col<'_>, tiling: &Tiling, x: &Input<'_>) -> Option<usize> {
    let c = geo.spec.in_channels;
    match x {
        Input::Plain(x) => Some(x.len() / geo.in_per_sample().max(1)),
        Input::Padded(x) if reads_padded(geo, tiling.tile) => {
            Some(x.len() / (tiling.hp * tiling.wp * c).max(1))
        }
        Input::Padded(_) => None,
    }
}

fn not_tiled(layer: &str) -> crate::error::SimError {
    crate::error::SimError::shape(
        layer,
        "padded input is not laid out as the Winograd tiles read it",
    )
}

/// The weight gradient of the conv on the samples in `x` for their output gradient `g`
/// (`[S, OH, OW, O]`), written into `dw` (`[O, (tap, C)]`, taps row-major over the 3×3 kernel;
/// every value overwritten).
pub(super) fn weight_grad(
    layer: &str,
    geo: &Im2col<'_>,
    x: Input<'_>,
    g: &[f32],
    dw: &mut [f32],
) -> Result<()> {
    weight_grad_chunked(layer, geo, x, g, dw, chunk_tiles(geo, Tile::F2))
}

/// [`weight_grad`] in chunks of `chunk` tiles.
fn weight_grad_chunked(
    layer: &str,
    geo: &Im2col<'_>,
    x: Input<'_>,
    g: &[f32],
    dw: &mut [f32],
    chunk: usize,
) -> Result<()> {
    const POS: usize = 16;
    let sp = geo.spec;
    let (c, o) = (sp.in_channels, sp.out_channels);
    let tiling = Tiling::new(geo, Tile::F2);
    let samples = samples_of(geo, &tiling, &x).ok_or_else(|| not_tiled(layer))?;
    if g.len() != samples * geo.rows_per_sample() * o || dw.len() != 9 * c * o {
        return Err(crate::error::SimError::shape(
            layer,
            "Winograd weight gradient: operands do not match the conv",
        ));
    }
    // dU[ξ] = Σ (A·δ·Aᵀ)[ξ]ᵀ·V[ξ], `[O, C]` each, `o·c + SKEW` apart.
    let su = o * c + SKEW;
    let mut du = vec![0.0f32; POS * su];
    by_chunks(layer, geo, &tiling, &x, chunk, |t0, nt, v, m| {
        let (sv, sm) = (nt * c + SKEW, nt * o + SKEW);
        transform_output_grad(geo, &tiling, g, t0, nt, m);
        for xi in 0..POS {
            let a = ArrayView2::from_shape((nt, o), &m[xi * sm..xi * sm + nt * o])
                .map_err(shape_err(layer))?;
            let b = ArrayView2::from_shape((nt, c), &v[xi * sv..xi * sv + nt * c])
                .map_err(shape_err(layer))?;
            let d = ArrayViewMut2::from_shape((o, c), &mut du[xi * su..xi * su + o * c])
                .map_err(shape_err(layer))?;
            matmul_winograd_into(d, a.t(), b, t0 > 0)?;
        }
        Ok(())
    })?;
    transform_kernel_grad(&du, su, o, c, dw);
    Ok(())
}

/// Calls `f(t0, nt, v, m)` on each chunk of (at most) `chunk` tiles of the samples in `x`, in
/// order: tiles `t0..t0 + nt`, `v` their transformed input ([`transform_input`], positions
/// `nt·c + SKEW` apart) and `m` room for a matrix of `nt × O` per position (`nt·o + SKEW`
/// apart).
fn by_chunks(
    layer: &str,
    geo: &Im2col<'_>,
    tiling: &Tiling,
    x: &Input<'_>,
    chunk: usize,
    mut f: impl FnMut(usize, usize, &[f32], &mut [f32]) -> Result<()>,
) -> Result<()> {
    let (c, o) = (geo.spec.in_channels, geo.spec.out_channels);
    let pos = tiling.tile.pos();
    let samples = samples_of(geo, tiling, x).ok_or_else(|| not_tiled(layer))?;
    let tiles = samples * tiling.th * tiling.tw;
    with_scratch(
        pos * (chunk * c + SKEW),
        pos * (chunk * o + SKEW),
        |v, m| -> Result<()> {
            for t0 in (0..tiles).step_by(chunk) {
                let nt = chunk.min(tiles - t0);
                let (sv, sm) = (nt * c + SKEW, nt * o + SKEW);
                let (v, m) = (&mut v[..pos * sv], &mut m[..pos * sm]);
                transform_input(geo, tiling, x, t0, nt, v);
                f(t0, nt, v, m)?;
            }
            Ok(())
        },
    )
}

/// [`forward`] in chunks of `chunk` tiles.
fn forward_chunked<'y>(
    layer: &str,
    geo: &Im2col<'_>,
    tile: Tile,
    u: &[PackedB],
    x: Input<'_>,
    y: &'y mut [MaybeUninit<f32>],
    chunk: usize,
) -> Result<&'y mut [f32]> {
    let sp = geo.spec;
    let (c, o) = (sp.in_channels, sp.out_channels);
    if u.len() != tile.pos() || u.iter().any(|ux| ux.dim() != (c, o)) {
        return Err(crate::error::SimError::shape(
            layer,
            "Winograd kernels do not match the conv's tile and channels",
        ));
    }
    let tiling = Tiling::new(geo, tile);
    by_chunks(layer, geo, &tiling, &x, chunk, |t0, nt, v, m| {
        let (sv, sm) = (nt * c + SKEW, nt * o + SKEW);
        for (xi, mx) in m.chunks_exact_mut(sm).enumerate() {
            let a = ArrayView2::from_shape((nt, c), &v[xi * sv..xi * sv + nt * c])
                .map_err(shape_err(layer))?;
            let mx = &mut mx[..nt * o];
            matmul_winograd_uninit(uninit(mx), a, &u[xi])?;
        }
        transform_output(geo, &tiling, m, t0, nt, y);
        Ok(())
    })?;
    // SAFETY: the tiles cover every output pixel, and `transform_output` wrote all `O` channels
    // of each (`y` has exactly `S·OH·OW·O` values: the caller's block).
    Ok(unsafe { &mut *(std::ptr::from_mut(y) as *mut [f32]) })
}

cptsim_kernels::simd::multiversion! {
/// Writes `Bᵀ·d·B` of tiles `t0..t0 + nt` of `x` into `v` (`[ξ][tile][c]`, positions
/// `nt·c + SKEW` apart): `Bᵀ` along the height once per row of tiles, for the whole padded width
/// (into `e`: the transformed rows; zeros where the padding is), then `B` along the width per
/// tile. Rows and columns of the padding are read as zeros without being copied.
fn transform_input(geo: &Im2col<'_>, tiling: &Tiling, x: &Input<'_>, t0: usize, nt: usize, v: &mut [f32]) {
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

cptsim_kernels::simd::multiversion! {
/// Writes `Aᵀ·m·A` of tiles `t0..t0 + nt` (`m`: `[ξ][tile][o]`, positions `nt·o + SKEW` apart)
/// into the outputs they cover: `Aᵀ` along the height into `f` (a tile's side of columns of
/// `m` rows each), then `A` along the width into `y`.
fn transform_output(
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

cptsim_kernels::simd::multiversion! {
/// Writes `A·δ·Aᵀ` of the output gradient `g` of tiles `t0..t0 + nt` into `m` (`[ξ][tile][o]`,
/// positions `nt·o + SKEW` apart): `A` along the height per column of the tile into `r`, then
/// `Aᵀ` along the width. Outputs past an odd height or width count as zeros.
fn transform_output_grad(geo: &Im2col<'_>, tiling: &Tiling, g: &[f32], t0: usize, nt: usize, m: &mut [f32]) {
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

cptsim_kernels::simd::multiversion! {
/// Writes `Gᵀ·dU·G` for every output channel into `dw` (`[O, (tap, C)]`) from `du`
/// (`[ξ][o][c]`, positions `su` apart): `Gᵀ` along the width into `h` (4 rows of 3 taps), then
/// `G` along the height.
fn transform_kernel_grad(du: &[f32], su: usize, o: usize, c: usize, dw: &mut [f32]) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layers::conv2d::Conv2dSpec;
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
                                    let xv =
                                        x[((s * geo.in_hw.0 + iy) * geo.in_hw.1 + ix) * c + ci];
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
        let out_hw = spec.output_hw("t", hw.0, hw.1).unwrap();
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
                                    let xv =
                                        x[((s * geo.in_hw.0 + iy) * geo.in_hw.1 + ix) * c + ci];
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
    type Runner =
        fn(&Conv2dSpec, (usize, usize), usize, usize, bool) -> (Vec<f32>, Vec<(f64, f64)>);
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
}
