//! The learned per-layer precision over training as a heat map (rows = controlled layers from the
//! input down, columns = iterations, colour = forward bits), with a bit legend and the iteration
//! range, drawn from the trace rows with a 3×5 pixel font.

use cptsim_traces::TraceRow;

use super::png::Rgb;

const PLOT_W: usize = 640;
const ROW_H: usize = 12;
const LEFT: usize = 40;
const TOP: usize = 24;
const LEGEND_W: usize = 70;
const BOTTOM: usize = 30;
const SCALE: usize = 2;
const WHITE: [u8; 3] = [255, 255, 255];
const BLACK: [u8; 3] = [0, 0, 0];
const GREY: [u8; 3] = [200, 200, 200];

/// 3×5 glyphs (rows top to bottom, 3 bits each, MSB left) for the characters the plot writes.
fn glyph(c: char) -> [u8; 5] {
    match c {
        '0' => [7, 5, 5, 5, 7],
        '1' => [2, 6, 2, 2, 7],
        '2' => [7, 1, 7, 4, 7],
        '3' => [7, 1, 7, 1, 7],
        '4' => [5, 5, 7, 1, 1],
        '5' => [7, 4, 7, 1, 7],
        '6' => [7, 4, 7, 5, 7],
        '7' => [7, 1, 1, 1, 1],
        '8' => [7, 5, 7, 5, 7],
        '9' => [7, 5, 7, 1, 7],
        'A' => [2, 5, 7, 5, 5],
        'B' => [6, 5, 6, 5, 6],
        'E' => [7, 4, 6, 4, 7],
        'I' => [7, 2, 2, 2, 7],
        'L' => [4, 4, 4, 4, 7],
        'N' => [5, 7, 7, 7, 5],
        'O' => [7, 5, 5, 5, 7],
        'P' => [7, 5, 7, 4, 4],
        'R' => [6, 5, 6, 5, 5],
        'S' => [7, 4, 7, 1, 7],
        'T' => [7, 2, 2, 2, 2],
        'Y' => [5, 5, 2, 2, 2],
        _ => [0; 5],
    }
}

/// Writes `text` with its top-left corner at `(x, y)`.
fn text(img: &mut Rgb, x: usize, y: usize, s: &str) {
    for (i, c) in s.chars().enumerate() {
        for (r, bits) in glyph(c).iter().enumerate() {
            for col in 0..3 {
                if bits >> (2 - col) & 1 == 1 {
                    let (px, py) = (x + (4 * i + col) * SCALE, y + r * SCALE);
                    img.fill((px, px + SCALE), (py, py + SCALE), BLACK);
                }
            }
        }
    }
}

/// Width in pixels of `s` drawn by [`text`].
fn text_w(s: &str) -> usize {
    s.chars().count() * 4 * SCALE
}

/// A perceptually ordered colour for `f` in [0, 1] (dark blue → teal → yellow).
pub fn color(f: f64) -> [u8; 3] {
    const STOPS: [[f64; 3]; 4] = [
        [68.0, 1.0, 84.0],
        [49.0, 104.0, 142.0],
        [53.0, 183.0, 121.0],
        [253.0, 231.0, 37.0],
    ];
    let x = f.clamp(0.0, 1.0) * (STOPS.len() - 1) as f64;
    let i = (x.floor() as usize).min(STOPS.len() - 2);
    let t = x - i as f64;
    let mut out = [0u8; 3];
    for (k, o) in out.iter_mut().enumerate() {
        *o = (STOPS[i][k] + t * (STOPS[i + 1][k] - STOPS[i][k])).round() as u8;
    }
    out
}

/// The forward bits of each of `layers` (trace indices) at each of `columns` sampled iterations
/// of `0..iterations`; 0 where the trace has no row.
fn sample(rows: &[TraceRow], layers: &[u32], iterations: u64, columns: usize) -> Vec<Vec<u8>> {
    let mut grid = vec![vec![0u8; columns]; layers.len()];
    for r in rows {
        let Some(li) = layers.iter().position(|&l| l == r.layer) else {
            continue;
        };
        for (c, cell) in grid[li].iter_mut().enumerate() {
            let t = c as u64 * iterations / columns as u64;
            if (r.iter_start..r.iter_end).contains(&t) {
                *cell = r.bits.w;
            }
        }
    }
    grid
}

/// The heat map of the forward bits of `layers` over `iterations`, coloured over `b_min..=b_max`.
pub fn bits_heatmap(
    rows: &[TraceRow],
    layers: &[u32],
    iterations: u64,
    (b_min, b_max): (u8, u8),
) -> Rgb {
    let iterations = iterations.max(1);
    // Whole pixels per iteration when the run is short, one column per pixel otherwise.
    let per = (PLOT_W as u64 / iterations).max(1) as usize;
    let columns = (PLOT_W / per).min(iterations as usize).max(1);
    let plot_w = columns * per;
    let plot_h = layers.len().max(1) * ROW_H;
    let mut img = Rgb::new(LEFT + plot_w + LEGEND_W, TOP + plot_h + BOTTOM, WHITE);
    let span = f64::from(b_max.saturating_sub(b_min)).max(1.0);
    for (li, row) in sample(rows, layers, iterations, columns).iter().enumerate() {
        let y = TOP + li * ROW_H;
        for (c, &b) in row.iter().enumerate() {
            let col = if b == 0 {
                GREY
            } else {
                color((f64::from(b) - f64::from(b_min)) / span)
            };
            img.fill(
                (LEFT + c * per, LEFT + (c + 1) * per),
                (y, y + ROW_H - 1),
                col,
            );
        }
        if li % 2 == 0 || layers.len() <= 12 {
            let label = li.to_string();
            text(&mut img, LEFT - 4 - text_w(&label), y + 1, &label);
        }
    }
    text(&mut img, 2, 4, "LAYER");
    text(&mut img, LEFT + plot_w + 8, 4, "BITS");
    text(&mut img, LEFT, TOP + plot_h + 6, "0");
    let end = iterations.to_string();
    text(
        &mut img,
        LEFT + plot_w - text_w(&end),
        TOP + plot_h + 6,
        &end,
    );
    let title = "ITERATION";
    text(
        &mut img,
        LEFT + plot_w / 2 - text_w(title) / 2,
        TOP + plot_h + 18,
        title,
    );
    for (k, b) in (b_min..=b_max).enumerate() {
        let y = TOP + k * (ROW_H + 4);
        let x = LEFT + plot_w + 8;
        img.fill(
            (x, x + 16),
            (y, y + ROW_H),
            color((f64::from(b) - f64::from(b_min)) / span),
        );
        text(&mut img, x + 22, y + 1, &b.to_string());
    }
    img
}

#[cfg(test)]
mod tests {
    use super::*;
    use cptsim_traces::Bits;

    fn row(s: u64, e: u64, layer: u32, fw: u8) -> TraceRow {
        TraceRow {
            iter_start: s,
            iter_end: e,
            layer,
            bits: Bits::forward_backward(fw, 8),
            samples: 8,
        }
    }

    #[test]
    fn sampling_follows_the_spans() {
        let rows = [row(0, 2, 3, 5), row(0, 2, 4, 8), row(2, 4, 3, 6)];
        let g = sample(&rows, &[3, 4], 4, 4);
        assert_eq!(g, vec![vec![5, 5, 6, 6], vec![8, 8, 0, 0]]);
    }

    #[test]
    fn heatmap_colours_cells_by_bits() {
        let rows = [row(0, 2, 0, 3), row(2, 4, 0, 8)];
        let img = bits_heatmap(&rows, &[0], 4, (3, 8));
        // 4 iterations → 160 px each.
        assert_eq!(img.width, LEFT + 640 + LEGEND_W);
        let at = |x: usize, y: usize| {
            let i = 3 * (y * img.width + x);
            [img.data[i], img.data[i + 1], img.data[i + 2]]
        };
        assert_eq!(at(LEFT + 10, TOP + 5), color(0.0));
        assert_eq!(at(LEFT + 400, TOP + 5), color(1.0));
        assert_ne!(color(0.0), color(1.0));
        assert!(img.encode().is_ok());
    }
}
