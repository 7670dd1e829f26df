// Measures the page as Chromium laid it out and writes the result as JSON into a
// preformatted element with the id "measured": the page's horizontal overflow, and per inline SVG the drawn text that
// falls outside the SVG's box or overlaps other text, the legend-like labels and the stroke
// colours of its lines.
(function () {
  const doc = document.documentElement;
  const box = (e) => {
    // a text's glyph outline is the <path> just before it; fall back to the text itself
    const p = e.previousElementSibling;
    const r = (p && p.tagName === "path" ? p : e).getBoundingClientRect();
    return { l: r.left, t: r.top, r: r.right, b: r.bottom };
  };
  const svgs = Array.from(document.querySelectorAll("svg")).map((svg, index) => {
    const s = svg.getBoundingClientRect();
    const texts = Array.from(svg.querySelectorAll("text"))
      .filter((t) => t.textContent.trim() !== "")
      .map((t) => ({ text: t.textContent.trim(), ...box(t) }));
    const outside = texts
      .filter((t) => t.l < s.left - 0.5 || t.t < s.top - 0.5 || t.r > s.right + 0.5 || t.b > s.bottom + 0.5)
      .map((t) => t.text);
    const overlaps = [];
    for (let i = 0; i < texts.length; i++) {
      for (let j = i + 1; j < texts.length; j++) {
        const a = texts[i], b = texts[j];
        const w = Math.min(a.r, b.r) - Math.max(a.l, b.l);
        const h = Math.min(a.b, b.b) - Math.max(a.t, b.t);
        if (w > 1 && h > 1) overlaps.push([a.text, b.text]);
      }
    }
    const strokes = Array.from(new Set(
      Array.from(svg.querySelectorAll("polyline"))
        .map((l) => (l.getAttribute("stroke") || "").toUpperCase())
        .filter((c) => c !== "" && c !== "NONE")
    ));
    return { index, width: s.width, height: s.height, texts: texts.map((t) => t.text), outside, overlaps, strokes };
  });
  const out = document.createElement("pre");
  out.id = "measured";
  out.textContent = JSON.stringify({
    scroll_width: doc.scrollWidth,
    client_width: doc.clientWidth,
    svgs,
  });
  document.body.appendChild(out);
})();
