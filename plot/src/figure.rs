//! Rendering a figure to SVG or PNG: the size and resolution flags, the embedded font, the shared
//! look of axes and legends, and atomic writing by file extension.

use std::io::Write;
use std::ops::Range;
use std::path::Path;
use std::sync::OnceLock;

use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::{register_font, FontStyle};

use crate::error::{PlotError, Result};
use cptsim_models::atomic::write_atomically;
use cptsim_traces::TraceError;

/// The family every figure's text uses. PNG text is drawn from the embedded DejaVu Sans
/// registered under this name; SVG text names it, so viewers use their own sans-serif face.
pub const FONT: &str = "sans-serif";

/// Largest PNG side in pixels (a sanity bound on `--width × --dpi`).
const MAX_PIXELS_SIDE: u64 = 16_384;

/// Size of a figure: `width × height` in CSS pixels (1/96 inch); PNGs are drawn at `dpi`
/// (96 = one pixel per CSS pixel, 192 = twice as many in each direction).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Size {
    pub width: u32,
    pub height: u32,
    pub dpi: u32,
}

impl Default for Size {
    fn default() -> Size {
        Size {
            width: 800,
            height: 500,
            dpi: 96,
        }
    }
}

impl Size {
    /// Checks the numbers (each at least 100 CSS px and 24 dpi; PNG sides within bounds).
    pub fn check(self) -> Result<Size> {
        if self.width < 100 || self.height < 100 {
            return Err(PlotError::Invalid(format!(
                "--width/--height: {}x{} is too small (at least 100x100)",
                self.width, self.height
            )));
        }
        if self.dpi < 24 {
            return Err(PlotError::Invalid(format!(
                "--dpi {}: at least 24",
                self.dpi
            )));
        }
        let (w, h) = self.pixels();
        if w > MAX_PIXELS_SIDE || h > MAX_PIXELS_SIDE {
            return Err(PlotError::Invalid(format!(
                "--width/--height/--dpi: a {w}x{h} PNG is larger than {MAX_PIXELS_SIDE} pixels a side"
            )));
        }
        Ok(self)
    }

    /// The PNG's size in pixels.
    fn pixels(self) -> (u64, u64) {
        let scale = |v: u32| u64::from(v) * u64::from(self.dpi) / 96;
        (scale(self.width), scale(self.height))
    }
}

/// Lengths and font sizes of one rendering: CSS pixels times `k` (dpi / 96 for PNGs).
#[derive(Clone, Copy, Debug)]
pub struct Look {
    k: f64,
}

impl Look {
    /// `v` CSS pixels in back-end pixels.
    pub fn px(&self, v: f64) -> u32 {
        (v * self.k).round().max(1.0) as u32
    }
    /// `v` CSS pixels as a signed back-end coordinate.
    pub fn at(&self, v: f64) -> i32 {
        (v * self.k).round() as i32
    }
    /// The text style of `size` CSS pixels.
    pub fn font(&self, size: f64) -> TextStyle<'static> {
        (FONT, size * self.k).into_font().color(&BLACK)
    }
    /// A line of `width` CSS pixels in `color`.
    pub fn line(&self, color: RGBColor, width: f64) -> ShapeStyle {
        color.stroke_width(self.px(width))
    }
}

/// Something drawable on any plotters back-end.
pub trait Figure {
    /// Draws the figure onto `area` (already filled white).
    fn draw<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>, look: Look) -> Result<()>;
}

/// Maps a plotters error to [`PlotError::Draw`].
pub(crate) trait Drawn<T> {
    fn drawn(self) -> Result<T>;
}

impl<T, E: std::error::Error + Send + Sync> Drawn<T>
    for std::result::Result<T, DrawingAreaErrorKind<E>>
{
    fn drawn(self) -> Result<T> {
        self.map_err(|e| PlotError::Draw(e.to_string()))
    }
}

/// Registers the embedded font once.
fn font_ready() -> Result<()> {
    static READY: OnceLock<bool> = OnceLock::new();
    let ok = READY
        .get_or_init(|| register_font(FONT, FontStyle::Normal, dejavu::sans::regular()).is_ok());
    if *ok {
        Ok(())
    } else {
        Err(PlotError::Draw(
            "the embedded DejaVu Sans font is unreadable".into(),
        ))
    }
}

/// The figure as an SVG document of `size`.
pub fn render_svg(fig: &impl Figure, size: Size) -> Result<String> {
    font_ready()?;
    let size = size.check()?;
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (size.width, size.height)).into_drawing_area();
        root.fill(&WHITE).drawn()?;
        fig.draw(&root, Look { k: 1.0 })?;
        root.present().drawn()?;
    }
    Ok(crate::svg_text::outline_text(&out))
}

/// The figure as a PNG file of `size` at its dpi.
pub fn render_png(fig: &impl Figure, size: Size) -> Result<Vec<u8>> {
    font_ready()?;
    let size = size.check()?;
    let (w, h) = size.pixels();
    // Both sides are at most MAX_PIXELS_SIDE, so these fit.
    let (w, h) = (w as u32, h as u32);
    let mut buf = vec![0u8; w as usize * h as usize * 3];
    {
        let root = crate::bitmap_text::Crisp(BitMapBackend::with_buffer(&mut buf, (w, h)))
            .into_drawing_area();
        root.fill(&WHITE).drawn()?;
        let look = Look {
            k: f64::from(size.dpi) / 96.0,
        };
        fig.draw(&root, look)?;
        root.present().drawn()?;
    }
    let mut png = Vec::new();
    image::ImageEncoder::write_image(
        image::codecs::png::PngEncoder::new(&mut png),
        &buf,
        w,
        h,
        image::ColorType::Rgb8,
    )
    .map_err(|e| PlotError::Draw(format!("PNG encoding: {e}")))?;
    Ok(png)
}

/// Output formats, chosen by file extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Svg,
    Png,
}

impl Format {
    /// The format `path` asks for (`.svg` or `.png`, any case).
    pub fn of(path: &Path) -> Result<Format> {
        let ext = path
            .extension()
            .map(|e| e.to_string_lossy().to_ascii_lowercase());
        match ext.as_deref() {
            Some("svg") => Ok(Format::Svg),
            Some("png") => Ok(Format::Png),
            _ => Err(PlotError::Invalid(format!(
                "-o {}: the file name must end in .svg or .png",
                path.display()
            ))),
        }
    }
}

/// Renders `fig` into `path` (SVG or PNG by its extension), atomically.
pub fn write(fig: &impl Figure, path: &Path, size: Size) -> Result<()> {
    let bytes = match Format::of(path)? {
        Format::Svg => render_svg(fig, size)?.into_bytes(),
        Format::Png => render_png(fig, size)?,
    };
    write_bytes(path, &bytes)
}

/// Writes `bytes` to `path` atomically (temporary file, then rename).
pub fn write_bytes(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomically(
        path,
        |w| w.write_all(bytes).map_err(|e| TraceError::io(path, e)),
        TraceError::io,
    )?;
    Ok(())
}

/// A chart on real axes.
pub(crate) type Chart<'a, DB> = ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// Titles and ranges of one chart's axes.
pub(crate) struct Axes<'t> {
    pub title: &'t str,
    pub x: Range<f64>,
    pub y: Range<f64>,
    pub x_desc: &'t str,
    pub y_desc: &'t str,
    /// Label the y axis with `-y` (for maps whose rows run downwards from 0).
    pub y_negated: bool,
    /// Names for the integer x positions `0, 1, …` (categories); empty: numeric ticks.
    pub x_names: &'t [String],
}

/// A chart with the common look: title, labelled axes with ticks and a light grid.
pub(crate) fn chart<'a, DB: DrawingBackend>(
    area: &'a DrawingArea<DB, Shift>,
    look: Look,
    axes: Axes<'_>,
) -> Result<Chart<'a, DB>> {
    let x = widen(axes.x);
    let y = widen(axes.y);
    let names = axes.x_names;
    // The title shrinks (down to 9 px) until it fits the panel's width.
    let room = f64::from(area.dim_in_pixel().0) * 0.96;
    let mut title_px = 17.0;
    while title_px > 9.0
        && f64::from(
            area.estimate_text_size(axes.title, &look.font(title_px))
                .drawn()?
                .0,
        ) > room
    {
        title_px -= 1.0;
    }
    let mut c = ChartBuilder::on(area)
        .caption(axes.title, look.font(title_px))
        .margin(look.px(8.0))
        .margin_right(look.px(22.0))
        .x_label_area_size(look.px(38.0))
        .y_label_area_size(look.px(58.0))
        .build_cartesian_2d(x.clone(), y.clone())
        .drawn()?;
    c.configure_mesh()
        .x_desc(axes.x_desc)
        .y_desc(axes.y_desc)
        .label_style(look.font(13.0))
        .axis_desc_style(look.font(14.0))
        .x_labels(if names.is_empty() {
            // about one label per 75 px, so narrow panels' labels do not run into each other
            (area.dim_in_pixel().0 / look.px(75.0)).clamp(3, 8) as usize
        } else {
            names.len() + 1
        })
        .y_labels(6)
        .x_label_formatter(&|v| {
            if names.is_empty() {
                tick(zeroed(*v, &x))
            } else if v.fract() == 0.0 && *v >= 0.0 {
                names.get(*v as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        .y_label_formatter(&|v| tick(zeroed(if axes.y_negated { -*v } else { *v }, &y)))
        .light_line_style(RGBColor(235, 235, 235))
        .bold_line_style(RGBColor(215, 215, 215))
        .draw()
        .drawn()?;
    Ok(c)
}

/// A legend in the upper right of `chart`.
pub(crate) fn legend<'a, DB: DrawingBackend + 'a>(
    chart: &mut Chart<'a, DB>,
    look: Look,
    position: SeriesLabelPosition,
) -> Result<()> {
    chart
        .configure_series_labels()
        .position(position)
        .label_font(look.font(13.0))
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(160, 160, 160))
        .margin(look.px(6.0))
        .draw()
        .drawn()
}

/// `v`, or 0 when it is rounding noise next to the axis' span (a tick at `-3.5e-18` is at 0).
fn zeroed(v: f64, axis: &Range<f64>) -> f64 {
    if v.abs() <= 1e-9 * (axis.end - axis.start).abs() {
        0.0
    } else {
        v
    }
}

/// A range that plotters can draw: empty or reversed ranges grow to a unit around their start.
fn widen(r: Range<f64>) -> Range<f64> {
    if r.end > r.start {
        r
    } else {
        let pad = (r.start.abs() * 0.05).max(0.5);
        r.start - pad..r.start + pad
    }
}

/// A tick label: plain for ordinary magnitudes, `k`/`M` from ten thousand (so labels stay
/// short: `64k`, `12.5k`, `300M`), scientific for very large or small ones.
pub(crate) fn tick(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if !(1e-3..1e9).contains(&a) {
        let s = format!("{v:.1e}");
        s.replace(".0e", "e")
    } else if a >= 1e4 {
        let (unit, suffix) = if a >= 1e6 { (1e6, "M") } else { (1e3, "k") };
        format!("{}{suffix}", plain(v / unit))
    } else if a >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        plain(v)
    }
}

/// `v` with at most three decimals and no trailing zeros.
fn plain(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The range `lo..hi` of `values` with a margin of `pad` (a fraction of the span) each side.
pub(crate) fn span(values: impl IntoIterator<Item = f64>, pad: f64) -> Option<Range<f64>> {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !(lo.is_finite() && hi.is_finite()) {
        return None;
    }
    let m = (hi - lo) * pad;
    Some(lo - m..hi + m)
}

/// The text of every `<text>` element of an SVG, in order (for tests of figure structure).
#[cfg(test)]
pub(crate) fn svg_texts(svg: &str) -> Vec<String> {
    svg.split("<text")
        .skip(1)
        .filter_map(|t| {
            let body = t.split_once('>')?.1;
            Some(body.split("</text>").next()?.trim().to_string())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_read_well() {
        assert_eq!(tick(0.0), "0");
        assert_eq!(tick(8.0), "8");
        assert_eq!(tick(0.25), "0.25");
        assert_eq!(tick(5000.0), "5000");
        assert_eq!(tick(64000.0), "64k");
        assert_eq!(tick(12500.0), "12.5k");
        assert_eq!(tick(-300000.0), "-300k");
        assert_eq!(tick(1.69e8), "169M");
        assert_eq!(tick(1.69e10), "1.7e10");
        assert_eq!(tick(2.5e-5), "2.5e-5");
    }

    #[test]
    fn sizes_are_checked() {
        assert!(Size::default().check().is_ok());
        let small = Size {
            width: 50,
            ..Size::default()
        };
        assert!(small.check().unwrap_err().to_string().contains("--width"));
        let huge = Size {
            dpi: 96 * 40,
            ..Size::default()
        };
        assert!(huge.check().unwrap_err().to_string().contains("larger"));
        assert!(Format::of(Path::new("a.jpg"))
            .unwrap_err()
            .to_string()
            .contains("a.jpg"));
        assert_eq!(Format::of(Path::new("A.SVG")).unwrap(), Format::Svg);
    }
}
