//! Colours: the Okabe–Ito palette for series (distinguishable with the common colour-vision
//! deficiencies, ordered so neighbours also differ in lightness) and viridis for heat maps
//! (perceptually uniform, monotone in lightness, so it survives greyscale).

use plotters::style::colors::colormaps::ViridisRGB;
use plotters::style::RGBColor;

/// Okabe–Ito colours, yellow last (weak on white) and black for the eighth series.
const SERIES: [RGBColor; 8] = [
    RGBColor(0, 114, 178),   // blue
    RGBColor(230, 159, 0),   // orange
    RGBColor(0, 158, 115),   // bluish green
    RGBColor(213, 94, 0),    // vermillion
    RGBColor(204, 121, 167), // reddish purple
    RGBColor(86, 180, 233),  // sky blue
    RGBColor(0, 0, 0),       // black
    RGBColor(240, 228, 66),  // yellow
];

/// The colour of series `i` (cycling after eight).
pub fn series(i: usize) -> RGBColor {
    SERIES[i % SERIES.len()]
}

/// Heat-map cells that ran in fp32 (no quantization): a mid grey outside the viridis ramp.
pub const FP32: RGBColor = RGBColor(170, 170, 170);

/// Viridis at `f` in `[0, 1]` (clamped).
pub fn viridis(f: f64) -> RGBColor {
    use plotters::style::colors::colormaps::ColorMap;
    let f = if f.is_finite() {
        f.clamp(0.0, 1.0)
    } else {
        0.0
    };
    ViridisRGB.get_color(f as f32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn luma(c: RGBColor) -> f64 {
        0.2126 * f64::from(c.0) + 0.7152 * f64::from(c.1) + 0.0722 * f64::from(c.2)
    }

    #[test]
    fn viridis_gets_lighter_monotonically() {
        let l: Vec<f64> = (0..=10).map(|i| luma(viridis(i as f64 / 10.0))).collect();
        assert!(l.windows(2).all(|w| w[1] > w[0]), "{l:?}");
        assert_eq!(viridis(-1.0), viridis(0.0));
        assert_eq!(viridis(f64::NAN), viridis(0.0));
    }

    #[test]
    fn series_colours_are_distinct() {
        for i in 0..8 {
            for j in 0..i {
                assert_ne!(series(i), series(j));
            }
        }
        assert_eq!(series(8), series(0));
    }
}
