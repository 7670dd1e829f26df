//! Drawing the [`Pareto`] figure: the legend strip, baselines, fronts, error bars and markers,
//! and with several accelerators each point's label.

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::error::Result;
use crate::figure::{chart, span, Axes, Drawn, Figure, Look};
use crate::marker::Marker;
use crate::palette;
use crate::pareto::{Pareto, Point};
use crate::strip::{legend_strip, Entry, Swatch};

impl Pareto {
    /// True when the accelerators are drawn apart (colour and marker each).
    fn several(&self) -> bool {
        self.accels.len() > 1
    }

    /// The legend above the plot; every swatch as its series is drawn.
    fn legend(&self) -> Vec<Entry> {
        let grey = RGBColor(110, 110, 110);
        let mut e = Vec::new();
        if self.several() {
            for (a, name) in self.accels.iter().enumerate() {
                let swatch = Swatch::LineMarker(palette::series(a), Marker::of(a));
                e.push(Entry::new(format!("{name} and its front"), swatch));
            }
            e.push(Entry::new(
                "static baseline cost (in its accelerator's colour)",
                Swatch::Dashed(grey),
            ));
            if self.points.iter().any(|p| p.is_static) {
                e.push(Entry::new(
                    "schedule = static (hollow)",
                    Swatch::Hollow(grey, Marker::Circle),
                ));
            }
            return e;
        }
        for (g, name) in self.groups.iter().enumerate() {
            let all_static = self
                .points
                .iter()
                .filter(|p| &p.group == name)
                .all(|p| p.is_static);
            let colour = palette::series(g);
            let swatch = match all_static {
                true => Swatch::Cross(colour),
                false => Swatch::Filled(colour, Marker::Circle),
            };
            e.push(Entry::new(name.as_str(), swatch));
        }
        e.push(Entry::new("Pareto front", Swatch::Line(BLACK)));
        e.push(Entry::new("static baseline cost", Swatch::Dashed(grey)));
        if self.points.iter().any(|p| p.is_static) {
            e.push(Entry::new("schedule = static (×)", Swatch::Cross(BLACK)));
        }
        e
    }

    /// Each point's label: the values of its configuration's keys that differ between points
    /// (the accelerator aside, which colour and marker say), or its `--by` value.
    pub(crate) fn labels(&self) -> Vec<String> {
        let pairs: Vec<Vec<(&str, &str)>> = self
            .points
            .iter()
            .map(|p| {
                p.config
                    .split(' ')
                    .filter_map(|kv| kv.split_once('='))
                    .filter(|(k, _)| *k != "accel")
                    .collect()
            })
            .collect();
        let varies = |k: usize| {
            let first = pairs.first().and_then(|p| p.get(k)).map(|kv| kv.1);
            pairs.iter().any(|p| p.get(k).map(|kv| kv.1) != first)
        };
        let width = pairs.first().map_or(0, Vec::len);
        // the --by value (the last key) first, then the other keys that vary
        let keys: Vec<usize> = (0..width)
            .rev()
            .take(1)
            .chain(0..width.saturating_sub(1))
            .filter(|&k| varies(k))
            .collect();
        self.points
            .iter()
            .zip(&pairs)
            .map(|(p, kv)| match keys.is_empty() {
                true => p.group.clone(),
                false => keys
                    .iter()
                    .filter_map(|&k| kv.get(k).map(|kv| kv.1))
                    .collect::<Vec<_>>()
                    .join(" "),
            })
            .collect()
    }

    /// The colour of point `p`: its accelerator's with several, else its group's.
    fn colour(&self, p: &Point) -> RGBColor {
        match self.several() {
            true => palette::series(p.accel),
            false => palette::series(self.groups.iter().position(|g| *g == p.group).unwrap_or(0)),
        }
    }
}

impl Figure for Pareto {
    fn draw<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>, look: Look) -> Result<()> {
        let area = legend_strip(area, look, &self.legend())?;
        let xr = span(
            self.points
                .iter()
                .map(|p| p.x)
                .chain(self.static_x.iter().map(|s| s.0)),
            0.08,
        )
        .unwrap_or(0.0..1.0);
        let yr = span(
            self.points
                .iter()
                .flat_map(|p| [p.y - p.y_std, p.y + p.y_std]),
            0.15,
        )
        .unwrap_or(0.0..1.0);
        let title = match self.several() {
            true => format!(
                "{} against {}, per accelerator",
                self.y.desc(),
                self.x.desc()
            ),
            false => format!(
                "{} against {}, by {}",
                self.y.desc(),
                self.x.desc(),
                self.by
            ),
        };
        let mut c = chart(
            &area,
            look,
            Axes {
                title: &title,
                x: xr.clone(),
                y: yr.clone(),
                x_desc: self.x.desc(),
                y_desc: self.y.desc(),
                y_negated: false,
                x_names: &[],
            },
        )?;
        let several = self.several();
        let grey = RGBColor(110, 110, 110);
        let (dash, gap) = (look.px(6.0), look.px(4.0));
        for &(sx, a) in &self.static_x {
            let colour = if several { palette::series(a) } else { grey };
            c.draw_series(DashedLineSeries::new(
                [(sx, yr.start), (sx, yr.end)],
                dash,
                gap,
                look.line(colour, 1.5),
            ))
            .drawn()?;
        }
        let r = look.px(4.5);
        for (a, front) in self.fronts.iter().enumerate() {
            let colour = if several { palette::series(a) } else { BLACK };
            let pts: Vec<(f64, f64)> = front
                .iter()
                .map(|&i| (self.points[i].x, self.points[i].y))
                .collect();
            c.draw_series(LineSeries::new(pts, look.line(colour, 1.5)))
                .drawn()?;
        }
        c.draw_series(self.points.iter().filter(|p| p.y_std > 0.0).map(|p| {
            ErrorBar::new_vertical(
                p.x,
                p.y - p.y_std,
                p.y,
                p.y + p.y_std,
                look.line(self.colour(p), 1.5),
                look.px(8.0),
            )
        }))
        .drawn()?;
        for p in &self.points {
            let colour = self.colour(p);
            let marker = if several {
                Marker::of(p.accel)
            } else {
                Marker::Circle
            };
            match (p.is_static, several) {
                (false, _) => marker.draw(&mut c, &[(p.x, p.y)], r, colour.filled())?,
                (true, true) => {
                    marker.draw(&mut c, &[(p.x, p.y)], r + 1, WHITE.filled())?;
                    marker.draw(&mut c, &[(p.x, p.y)], r + 1, look.line(colour, 1.5))?;
                }
                (true, false) => {
                    c.draw_series([Cross::new((p.x, p.y), r + 1, look.line(colour, 2.5))])
                        .drawn()?;
                }
            }
        }
        if several {
            // each point's configuration beside it, on the side with room, moved up or down
            // (or left out) where it would cover a label already placed
            let font = look.font(11.0);
            let mid = (xr.start + xr.end) / 2.0;
            let gap = look.at(8.0);
            let height = look.at(13.0);
            let mut placed: Vec<[i32; 4]> = Vec::new();
            let mut texts = Vec::new();
            for (p, label) in self.points.iter().zip(self.labels()) {
                let right = p.x <= mid;
                let (px, py) = c.backend_coord(&(p.x, p.y));
                let width = look.at(6.5 * label.chars().count() as f64);
                let spot = [0, -1, 1, -2, 2].into_iter().find_map(|k| {
                    let dy = k * height;
                    let x0 = if right { px + gap } else { px - gap - width };
                    let y0 = py + dy - height / 2;
                    let rect = [x0, y0, x0 + width, y0 + height];
                    let free = placed.iter().all(|q| {
                        rect[2] <= q[0] || q[2] <= rect[0] || rect[3] <= q[1] || q[3] <= rect[1]
                    });
                    free.then_some((rect, dy))
                });
                let Some((rect, dy)) = spot else { continue };
                placed.push(rect);
                let (dx, h) = if right {
                    (gap, HPos::Left)
                } else {
                    (-gap, HPos::Right)
                };
                texts.push(
                    EmptyElement::at((p.x, p.y))
                        + Text::new(label, (dx, dy), font.pos(Pos::new(h, VPos::Center))),
                );
            }
            c.draw_series(texts).drawn()?;
        }
        Ok(())
    }
}
