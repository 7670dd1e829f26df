//! Point markers that tell series apart by shape as well as colour (a Pareto plot's accelerators),
//! drawn the same on the chart and in its legend ([`Marker::outline`]).

use plotters::prelude::*;

use crate::error::Result;
use crate::figure::{Chart, Drawn};

/// A marker shape: the `i`-th series' is [`Marker::of`]`(i)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Marker {
    Circle,
    Square,
    Triangle,
    Diamond,
}

impl Marker {
    const ALL: [Marker; 4] = [
        Marker::Circle,
        Marker::Square,
        Marker::Triangle,
        Marker::Diamond,
    ];

    /// The marker of series `i` (cycling after four).
    pub fn of(i: usize) -> Marker {
        Self::ALL[i % Self::ALL.len()]
    }

    /// The shape's outline around `(0, 0)` for a marker of radius `r` back-end pixels (squares
    /// a little smaller, so every shape covers about the same area). Charts draw circles as
    /// circles; legends draw every shape from its outline.
    pub(crate) fn outline(self, r: i32) -> Vec<(i32, i32)> {
        let s = (f64::from(r) * 0.85).round() as i32;
        let d = (f64::from(r) * 1.2).round() as i32;
        match self {
            // a 16-gon: the legend's circle, drawn as a polygon like the other shapes
            Marker::Circle => (0..16)
                .map(|k| {
                    let t = f64::from(k) * std::f64::consts::PI / 8.0;
                    let rf = f64::from(r);
                    ((rf * t.cos()).round() as i32, (rf * t.sin()).round() as i32)
                })
                .collect(),
            Marker::Square => vec![(-s, -s), (s, -s), (s, s), (-s, s)],
            Marker::Triangle => vec![(0, -d), (d, d * 2 / 3), (-d, d * 2 / 3)],
            Marker::Diamond => vec![(0, -d), (d, 0), (0, d), (-d, 0)],
        }
    }

    /// Draws the marker at each of `points`, filled with `style`'s colour or outlined in it.
    pub(crate) fn draw<DB: DrawingBackend>(
        self,
        chart: &mut Chart<'_, DB>,
        points: &[(f64, f64)],
        r: u32,
        style: ShapeStyle,
    ) -> Result<()> {
        let ri = i32::try_from(r).unwrap_or(i32::MAX);
        match self {
            Marker::Circle => {
                chart
                    .draw_series(points.iter().map(|&p| Circle::new(p, r, style)))
                    .drawn()?;
            }
            shape if style.filled => {
                let outline = shape.outline(ri);
                chart
                    .draw_series(
                        points
                            .iter()
                            .map(|&p| EmptyElement::at(p) + Polygon::new(outline.clone(), style)),
                    )
                    .drawn()?;
            }
            shape => {
                // an outline: the polygon's edges, closed
                let mut ring = shape.outline(ri);
                ring.extend(ring.first().copied());
                chart
                    .draw_series(
                        points
                            .iter()
                            .map(|&p| EmptyElement::at(p) + PathElement::new(ring.clone(), style)),
                    )
                    .drawn()?;
            }
        }
        Ok(())
    }
}
