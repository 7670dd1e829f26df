//! SVG text as glyph outlines: every `<text>` plotters wrote gets a `<path>` of its glyphs from
//! the embedded DejaVu Sans in front of it, and the `<text>` itself turns transparent (still
//! there to search, select and test). An SVG then shows its text on a machine without fonts.

use std::fmt::Write as _;

use ab_glyph::{Font, OutlineCurve, Point};

use crate::bitmap_text::font;

/// The value of attribute `name` in an opening tag.
fn attr<'t>(tag: &'t str, name: &str) -> Option<&'t str> {
    let key = format!(" {name}=\"");
    let start = tag.find(&key)? + key.len();
    let len = tag[start..].find('"')?;
    Some(&tag[start..start + len])
}

/// Undoes the XML escapes of text content.
fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&amp;", "&")
}

/// The path data of `text` at `size` px with its anchor at `(x, y)`; `anchor` is the SVG
/// `text-anchor`, `dy` plotters' baseline shift (`0.76em`, `0.5ex` or `-0.5ex`).
fn glyph_path(text: &str, size: f32, (x, y): (f32, f32), anchor: &str, dy: &str) -> Option<String> {
    let font = font()?;
    let scale = size / font.units_per_em()?;
    let mut caret = 0.0f32;
    let mut prev = None;
    let mut placed = Vec::new();
    for c in text.chars() {
        let id = font.glyph_id(c);
        if let Some(p) = prev {
            caret += font.kern_unscaled(p, id) * scale;
        }
        placed.push((id, caret));
        caret += font.h_advance_unscaled(id) * scale;
        prev = Some(id);
    }
    let x0 = match anchor {
        "middle" => x - caret / 2.0,
        "end" => x - caret,
        _ => x,
    };
    // Browsers resolve ex from the font's x-height (DejaVu Sans: 1120/2048 em).
    let ex = 1120.0 / 2048.0 * size;
    let base = y + match dy {
        "0.76em" => 0.76 * size,
        "0.5ex" => 0.5 * ex,
        "-0.5ex" => -0.5 * ex,
        _ => 0.0,
    };
    let mut d = String::new();
    for (id, at) in placed {
        let Some(outline) = font.outline(id) else {
            continue;
        };
        let map = |p: Point| (x0 + at + p.x * scale, base - p.y * scale);
        let mut pen: Option<Point> = None;
        for curve in &outline.curves {
            let (start, end) = match *curve {
                OutlineCurve::Line(a, b) => (a, b),
                OutlineCurve::Quad(a, _, c) => (a, c),
                OutlineCurve::Cubic(a, _, _, d) => (a, d),
            };
            if pen != Some(start) {
                if pen.is_some() {
                    d.push('Z');
                }
                let (px, py) = map(start);
                let _ = write!(d, "M{px:.2} {py:.2}");
            }
            match *curve {
                OutlineCurve::Line(_, b) => {
                    let (bx, by) = map(b);
                    let _ = write!(d, "L{bx:.2} {by:.2}");
                }
                OutlineCurve::Quad(_, b, c) => {
                    let ((bx, by), (cx, cy)) = (map(b), map(c));
                    let _ = write!(d, "Q{bx:.2} {by:.2} {cx:.2} {cy:.2}");
                }
                OutlineCurve::Cubic(_, b, c, e) => {
                    let ((bx, by), (cx, cy), (ex, ey)) = (map(b), map(c), map(e));
                    let _ = write!(d, "C{bx:.2} {by:.2} {cx:.2} {cy:.2} {ex:.2} {ey:.2}");
                }
            }
            pen = Some(end);
        }
        if pen.is_some() {
            d.push('Z');
        }
    }
    Some(d)
}

/// `svg` with every `<text>` element preceded by its glyph outlines and made transparent.
pub(crate) fn outline_text(svg: &str) -> String {
    let mut out = String::with_capacity(svg.len() * 2);
    let mut rest = svg;
    while let Some(start) = rest.find("<text") {
        out.push_str(&rest[..start]);
        let tail = &rest[start..];
        let (Some(open_end), Some(close)) = (tail.find('>'), tail.find("</text>")) else {
            break;
        };
        let tag = &tail[..open_end];
        let content = unescape(tail[open_end + 1..close].trim());
        let element = &tail[..close + "</text>".len()];
        let size = attr(tag, "font-size").and_then(|s| s.parse::<f32>().ok());
        let x = attr(tag, "x").and_then(|s| s.parse::<f32>().ok());
        let y = attr(tag, "y").and_then(|s| s.parse::<f32>().ok());
        let path = match (size, x, y) {
            (Some(size), Some(x), Some(y)) => glyph_path(
                &content,
                size,
                (x, y),
                attr(tag, "text-anchor").unwrap_or("start"),
                attr(tag, "dy").unwrap_or(""),
            ),
            _ => None,
        };
        match path {
            Some(d) => {
                let fill = attr(tag, "fill").unwrap_or("#000000");
                let _ = write!(out, "<path d=\"{d}\" fill=\"{fill}\"");
                if let Some(t) = attr(tag, "transform") {
                    let _ = write!(out, " transform=\"{t}\"");
                }
                out.push_str("/>\n");
                out.push_str(&element.replacen(
                    " opacity=\"",
                    " fill-opacity=\"0\" data-opacity=\"",
                    1,
                ));
            }
            None => out.push_str(element),
        }
        rest = &tail[close + "</text>".len()..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_gets_outlines_and_stays_as_transparent_text() {
        let svg = "<svg>\n<text x=\"10\" y=\"20\" dy=\"0.76em\" text-anchor=\"middle\" \
                   font-family=\"sans-serif\" font-size=\"12\" opacity=\"1\" fill=\"#123456\" \
                   transform=\"rotate(270, 10, 20)\">\na &amp; o\n</text>\n</svg>";
        let out = outline_text(svg);
        assert!(out.contains("<path d=\"M"), "{out}");
        assert!(out.contains("fill=\"#123456\" transform=\"rotate(270, 10, 20)\"/>"));
        assert!(out.contains("fill-opacity=\"0\"") && out.contains("\na &amp; o\n</text>"));
        // 'a' and 'o' have holes: several closed contours.
        let d = attr(&out, "d").unwrap();
        assert!(d.matches('Z').count() >= 4, "{d}");
        // Centred on x = 10: the outline spans both sides.
        let xs: Vec<f32> = d
            .split(|c: char| c.is_ascii_alphabetic())
            .filter_map(|p| p.split_whitespace().next()?.parse().ok())
            .collect();
        assert!(xs.iter().any(|&x| x < 10.0) && xs.iter().any(|&x| x > 10.0));
        assert_eq!(outline_text("<svg></svg>"), "<svg></svg>");
    }
}
