//! The PNG back-end: plotters' bitmap back-end with its own text drawing. Glyphs are laid out
//! with ab_glyph on a sub-pixel caret (advance and kerning) and rasterised at their true bounds,
//! from the embedded DejaVu Sans; anchors and quarter-turn rotations follow plotters' text
//! style. Everything else is the bitmap back-end's.

use std::sync::OnceLock;

use ab_glyph::{point, Font, FontRef, ScaleFont};
use plotters::prelude::*;
use plotters_backend::text_anchor::{HPos, VPos};
use plotters_backend::{
    BackendColor, BackendCoord, BackendStyle, BackendTextStyle, DrawingErrorKind,
};

/// The embedded font, parsed once.
pub(crate) fn font() -> Option<&'static FontRef<'static>> {
    static FONT: OnceLock<Option<FontRef<'static>>> = OnceLock::new();
    FONT.get_or_init(|| FontRef::try_from_slice(dejavu::sans::regular()).ok())
        .as_ref()
}

/// The bitmap back-end with crisp text.
pub(crate) struct Crisp<'a>(pub BitMapBackend<'a>);

type Error<'a> = DrawingErrorKind<<BitMapBackend<'a> as DrawingBackend>::ErrorType>;

impl<'a> DrawingBackend for Crisp<'a> {
    type ErrorType = <BitMapBackend<'a> as DrawingBackend>::ErrorType;

    fn get_size(&self) -> (u32, u32) {
        self.0.get_size()
    }
    fn ensure_prepared(&mut self) -> Result<(), Error<'a>> {
        self.0.ensure_prepared()
    }
    fn present(&mut self) -> Result<(), Error<'a>> {
        self.0.present()
    }
    fn draw_pixel(&mut self, point: BackendCoord, color: BackendColor) -> Result<(), Error<'a>> {
        self.0.draw_pixel(point, color)
    }
    fn draw_line<S: BackendStyle>(
        &mut self,
        from: BackendCoord,
        to: BackendCoord,
        style: &S,
    ) -> Result<(), Error<'a>> {
        self.0.draw_line(from, to, style)
    }
    fn draw_rect<S: BackendStyle>(
        &mut self,
        upper_left: BackendCoord,
        bottom_right: BackendCoord,
        style: &S,
        fill: bool,
    ) -> Result<(), Error<'a>> {
        self.0.draw_rect(upper_left, bottom_right, style, fill)
    }
    fn draw_path<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        path: I,
        style: &S,
    ) -> Result<(), Error<'a>> {
        self.0.draw_path(path, style)
    }
    fn draw_circle<S: BackendStyle>(
        &mut self,
        center: BackendCoord,
        radius: u32,
        style: &S,
        fill: bool,
    ) -> Result<(), Error<'a>> {
        self.0.draw_circle(center, radius, style, fill)
    }
    fn fill_polygon<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        vert: I,
        style: &S,
    ) -> Result<(), Error<'a>> {
        self.0.fill_polygon(vert, style)
    }
    fn blit_bitmap(
        &mut self,
        pos: BackendCoord,
        size: (u32, u32),
        src: &[u8],
    ) -> Result<(), Error<'a>> {
        self.0.blit_bitmap(pos, size, src)
    }
    fn estimate_text_size<S: BackendTextStyle>(
        &self,
        text: &str,
        style: &S,
    ) -> Result<(u32, u32), Error<'a>> {
        self.0.estimate_text_size(text, style)
    }

    fn draw_text<S: BackendTextStyle>(
        &mut self,
        text: &str,
        style: &S,
        pos: BackendCoord,
    ) -> Result<(), Error<'a>> {
        let color = style.color();
        let Some(font) = font() else {
            return self.0.draw_text(text, style, pos);
        };
        if color.alpha == 0.0 {
            return Ok(());
        }
        let size = style.size() as f32;
        let scaled = font.as_scaled(size);
        // Caret positions with kerning; the same advances plotters' size estimate sums.
        let mut caret = 0.0f32;
        let mut prev = None;
        let mut glyphs = Vec::new();
        for c in text.chars() {
            let id = scaled.glyph_id(c);
            if let Some(p) = prev {
                caret += scaled.kern(p, id);
            }
            glyphs.push(id.with_scale_and_position(size, point(caret, 0.0)));
            caret += scaled.h_advance(id);
            prev = Some(id);
        }
        let dx = match style.anchor().h_pos {
            HPos::Left => 0.0,
            HPos::Center => -caret / 2.0,
            HPos::Right => -caret,
        };
        // Baseline below the anchor: top of the ascenders, middle of the digits, or bottom of
        // the descenders.
        let dy = match style.anchor().v_pos {
            VPos::Top => 0.72 * size,
            VPos::Center => 0.34 * size,
            VPos::Bottom => scaled.descent(),
        };
        let turn = style.transform();
        let mut pixels = Vec::new();
        for g in glyphs {
            if let Some(o) = font.outline_glyph(g) {
                let b = o.px_bounds();
                o.draw(|x, y, cover| {
                    let px = (b.min.x + x as f32 + dx).round() as i32;
                    let py = (b.min.y + y as f32 + dy).round() as i32;
                    pixels.push((px, py, cover));
                });
            }
        }
        for (x, y, cover) in pixels {
            if cover <= 0.0 {
                continue;
            }
            let (x, y) = turn.transform(x, y);
            let c = BackendColor {
                alpha: color.alpha * f64::from(cover.min(1.0)),
                rgb: color.rgb,
            };
            self.0.draw_pixel((pos.0 + x, pos.1 + y), c)?;
        }
        Ok(())
    }
}
