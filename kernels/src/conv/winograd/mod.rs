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

#[cfg(test)]
mod tests;
mod transforms;

use std::mem::MaybeUninit;

use ndarray::{ArrayView2, ArrayViewMut2};
use rayon::prelude::*;

use super::im2col::Im2col;
use super::lanes::uninit;
use super::{shape_err, with_scratch};
use crate::error::Result;
use crate::gemm::{matmul_winograd_into, matmul_winograd_uninit, PackedB, PANEL, ROW_TILE};
use transforms::{
    kernel_panel, transform_input, transform_kernel_grad, transform_output, transform_output_grad,
};

/// The size of a Winograd tile: outputs per side.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tile {
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
pub fn forward_tile(geo: &Im2col<'_>) -> Option<Tile> {
    (is_3x3_unit(geo) && F4_CHANNELS.contains(&geo.spec.in_channels)).then_some(Tile::F4)
}

/// True when the weight gradient runs by F(2×2, 3×3): a 3×3 unit-stride conv of 32–256 input
/// channels, on the input a training pass keeps (padded when the spec pads, [`reads_padded`]).
pub fn weight_grad_applies(geo: &Im2col<'_>) -> bool {
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
pub fn weights(b: ArrayView2<f32>, c: usize, tile: Tile) -> Result<Vec<PackedB>> {
    let o = b.ncols();
    // Row `oi` of `w`: the taps of output channel `oi`, `[tap][c]`.
    let bt = b.t();
    let w = bt.as_standard_layout();
    let w = w.as_slice().unwrap_or_default();
    if b.nrows() != 9 * c || w.len() != 9 * c * o {
        return Err(crate::error::KernelError::shape(
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
        .map(|ux| PackedB::from_panels(ux, c, o))
        .collect::<Result<_>>()
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
pub enum Input<'a> {
    /// `[S, H, W, C]` as they lie.
    Plain(&'a [f32]),
    /// Padded as [`Im2col::pad_into`] writes them, where that is the layout the tiles read
    /// ([`reads_padded`]).
    Padded(&'a [f32]),
}

/// True when the spec's padded input ([`Im2col::pad_into`]) is the layout `tile`'s tiles read:
/// an output whose height and width are multiples of the tile's, so the tiles end where the
/// padding does.
pub fn reads_padded(geo: &Im2col<'_>, tile: Tile) -> bool {
    let t = Tiling::new(geo, tile);
    (t.hp, t.wp) == geo.padded_hw()
}

/// The conv of the samples in `x` with the transformed kernels `u` ([`weights`] for `tile`)
/// written into `y` (`[S, OH, OW, O]`, uninitialised); returns `y`, every value written.
pub fn forward<'y>(
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
pub fn samples_per_block(geo: &Im2col<'_>, tile: Option<Tile>) -> usize {
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
pub fn products(geo: &Im2col<'_>, tile: Tile, samples: usize) -> Vec<([usize; 3], usize)> {
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
pub fn weight_products(geo: &Im2col<'_>, samples: usize) -> Vec<([usize; 3], usize)> {
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

fn not_tiled(layer: &str) -> crate::error::KernelError {
    crate::error::KernelError::shape(
        layer,
        "padded input is not laid out as the Winograd tiles read it",
    )
}

/// The weight gradient of the conv on the samples in `x` for their output gradient `g`
/// (`[S, OH, OW, O]`), written into `dw` (`[O, (tap, C)]`, taps row-major over the 3×3 kernel;
/// every value overwritten).
pub fn weight_grad(
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
        return Err(crate::error::KernelError::shape(
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
        return Err(crate::error::KernelError::shape(
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
