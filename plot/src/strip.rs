//! A legend drawn as a strip above a figure's panels rather than as a box inside one: it covers
//! no data, serves every panel at once and wraps onto further rows when the entries do not fit
//! the figure's width.

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::error::Result;
use crate::figure::{Drawn, Look};
use crate::marker::Marker;

/// How an entry's sample is drawn: as the series is drawn on the panels.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Swatch {
    /// A solid line.
    Line(RGBColor),
    /// A dashed line: two dashes and a gap.
    Dashed(RGBColor),
    /// A filled patch (a series named by colour alone).
    Patch(RGBColor),
    /// A solid line with a filled marker on it (a series of points joined by a line).
    LineMarker(RGBColor, Marker),
    /// A filled marker (a series of points).
    Filled(RGBColor, Marker),
    /// A marker's outline, unfilled.
    Hollow(RGBColor, Marker),
    /// A cross (×).
    Cross(RGBColor),
}

/// One legend entry.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Entry {
    pub label: String,
    pub swatch: Swatch,
}

impl Entry {
    pub(crate) fn new(label: impl Into<String>, swatch: Swatch) -> Entry {
        Entry {
            label: label.into(),
            swatch,
        }
    }
}

/// Draws `entries` in a strip along the top of `area`, left to right and wrapping; returns the
/// area below the strip for the panels.
pub(crate) fn legend_strip<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    look: Look,
    entries: &[Entry],
) -> Result<DrawingArea<DB, Shift>> {
    let font = look.font(13.0);
    let width = i32::try_from(area.dim_in_pixel().0).unwrap_or(i32::MAX);
    let (pad, sample, gap, row_h) = (look.at(12.0), look.at(24.0), look.at(20.0), look.at(20.0));
    let mut places = Vec::with_capacity(entries.len());
    let (mut x, mut row) = (pad, 0);
    for e in entries {
        let text = i32::try_from(area.estimate_text_size(&e.label, &font).drawn()?.0)
            .unwrap_or(i32::MAX / 4);
        let need = sample + look.at(6.0) + text;
        if x > pad && x + need > width - pad {
            row += 1;
            x = pad;
        }
        places.push((x, row));
        x += need + gap;
    }
    let height = (row + 1) * row_h + look.at(8.0);
    let (top, rest) = area.split_vertically(height);
    let anchored = font.pos(Pos::new(HPos::Left, VPos::Center));
    for (e, &(x, row)) in entries.iter().zip(&places) {
        let y = look.at(6.0) + row * row_h + row_h / 2;
        draw_swatch(&top, look, e.swatch, (x, y), sample)?;
        top.draw(&Text::new(
            e.label.clone(),
            (x + sample + look.at(6.0), y),
            anchored.clone(),
        ))
        .drawn()?;
    }
    Ok(rest)
}

/// Draws `swatch` from `(x, y)` over `len` pixels.
fn draw_swatch<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    look: Look,
    swatch: Swatch,
    (x, y): (i32, i32),
    len: i32,
) -> Result<()> {
    let r = look.at(4.5);
    let mid = (x + len / 2, y);
    let at = |p: &[(i32, i32)]| -> Vec<(i32, i32)> {
        p.iter().map(|(dx, dy)| (mid.0 + dx, mid.1 + dy)).collect()
    };
    match swatch {
        Swatch::Line(c) => area
            .draw(&PathElement::new([(x, y), (x + len, y)], look.line(c, 2.0)))
            .drawn(),
        Swatch::Dashed(c) => {
            let d = len * 2 / 5;
            area.draw(&PathElement::new([(x, y), (x + d, y)], look.line(c, 2.0)))
                .drawn()?;
            area.draw(&PathElement::new(
                [(x + len - d, y), (x + len, y)],
                look.line(c, 2.0),
            ))
            .drawn()
        }
        Swatch::Patch(c) => area
            .draw(&Rectangle::new(
                [(mid.0 - r * 3 / 2, y - r), (mid.0 + r * 3 / 2, y + r)],
                c.filled(),
            ))
            .drawn(),
        Swatch::LineMarker(c, m) => {
            area.draw(&PathElement::new([(x, y), (x + len, y)], look.line(c, 1.5)))
                .drawn()?;
            area.draw(&Polygon::new(at(&m.outline(r)), c.filled()))
                .drawn()
        }
        Swatch::Filled(c, m) => area
            .draw(&Polygon::new(at(&m.outline(r)), c.filled()))
            .drawn(),
        Swatch::Hollow(c, m) => {
            let mut ring = at(&m.outline(r));
            if let Some(&first) = ring.first() {
                ring.push(first);
            }
            area.draw(&PathElement::new(ring, look.line(c, 1.5)))
                .drawn()
        }
        Swatch::Cross(c) => area
            .draw(&Cross::new(mid, look.px(5.5), look.line(c, 2.5)))
            .drawn(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::figure::{render_svg, svg_texts, Figure, Size};

    struct Strip(Vec<Entry>);

    impl Figure for Strip {
        fn draw<DB: DrawingBackend>(
            &self,
            area: &DrawingArea<DB, Shift>,
            look: Look,
        ) -> Result<()> {
            let rest = legend_strip(area, look, &self.0)?;
            let (_, h) = rest.dim_in_pixel();
            assert!(h > 0);
            Ok(())
        }
    }

    #[test]
    fn every_entry_is_drawn_once_and_long_lists_wrap() {
        let entries: Vec<Entry> = (0..12)
            .map(|i| Entry::new(format!("series number {i}"), Swatch::Line(BLACK)))
            .collect();
        let svg = render_svg(&Strip(entries), Size::default()).unwrap();
        let texts = svg_texts(&svg);
        assert_eq!(texts.len(), 12);
        // twelve entries of ~130 px do not fit one 800 px row: the last is on a lower row
        let y = |label: &str| -> f64 {
            let tag = svg.split("<text").find(|t| t.contains(label)).unwrap();
            let at = tag.split(" y=\"").nth(1).unwrap();
            at[..at.find('"').unwrap()].parse().unwrap()
        };
        assert!(y("series number 11") > y("series number 0"));
    }
}
