//! Reports as pictures: SVG charts drawn with plotters (text left to the
//! viewer, so no font library at build time), and PNG copies rasterised
//! with resvg using the system's fonts.
//!
//! - [`throughput_svg`]: one panel per phase, a horizontal bar per target
//!   (thousands of operations per second), Tembo in blue, durable peers in
//!   orange, volatile ones in grey.
//! - [`latency_svg`]: one panel per phase, per target the median latency as
//!   a bar and the 99th percentile as a whisker, on a log scale.
//! - [`flushes_svg`]: one panel per phase, the cache lines flushed and
//!   the fences per operation of every target that counts them (Tembo's).
//! - [`series_svg`]: a line chart of named series over a numeric x axis
//!   (the ordering study: latency against write ratio).

use anyhow::{bail, Context, Result};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::report::Report;

const FONT: &str = "sans-serif";
const TEMBO: RGBColor = RGBColor(0, 114, 178);
const DURABLE_PEER: RGBColor = RGBColor(213, 94, 0);
const VOLATILE: RGBColor = RGBColor(150, 150, 150);
const FENCES: RGBColor = RGBColor(0, 158, 115);
/// Line colours for series (Okabe–Ito, colour-blind safe).
const COLORS: [RGBColor; 6] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
];

fn color_of(target: &str, durable: bool) -> RGBColor {
    if (target.starts_with("cdds") || target == "tembo-serve") && durable {
        TEMBO
    } else if durable {
        DURABLE_PEER
    } else {
        VOLATILE
    }
}

/// One horizontal bar: label, value, optional whisker end, colour.
struct Bar {
    label: String,
    value: f64,
    whisker: Option<f64>,
    color: RGBColor,
}

fn caption(r: &Report) -> String {
    format!(
        "{} {} · median of {} run(s) · {} ({}) · {}",
        r.workload, r.params, r.runs, r.dir, r.filesystem, r.machine.cpu_model
    )
}

/// Throughput per target per phase.
///
/// # Errors
/// A report without phases; drawing errors.
pub fn throughput_svg(r: &Report) -> Result<String> {
    let panels = panels(r, |t, p| Bar {
        label: t.target.clone(),
        value: p.per_s / 1000.0,
        whisker: None,
        color: color_of(&t.target, t.durable),
    });
    bar_panels("Throughput (thousand operations per second)", &caption(r), &panels, false)
}

/// Median latency with the 99th percentile per target per phase.
///
/// # Errors
/// A report without phases; drawing errors.
pub fn latency_svg(r: &Report) -> Result<String> {
    let panels = panels(r, |t, p| Bar {
        label: t.target.clone(),
        value: p.latency.p50_ns as f64 / 1000.0,
        whisker: Some(p.latency.p99_ns as f64 / 1000.0),
        color: color_of(&t.target, t.durable),
    });
    bar_panels("Latency per operation: median (bar) and 99th percentile (whisker), µs", &caption(r), &panels, true)
}

/// Cache lines flushed and fences per operation, one panel per phase,
/// for the targets that count them; `None` when no target does.
///
/// # Errors
/// Drawing errors.
pub fn flushes_svg(r: &Report) -> Result<Option<String>> {
    let panels: Vec<(String, Vec<Bar>)> = r
        .phase_names()
        .into_iter()
        .map(|phase| {
            let mut bars = Vec::new();
            for t in &r.targets {
                let Some(p) = t.phases.iter().find(|p| p.phase == phase) else { continue };
                let counted = [(p.lines_per_op, "lines", TEMBO), (p.fences_per_op, "fences", FENCES)];
                for (value, what, color) in counted {
                    if let Some(value) = value {
                        bars.push(Bar { label: format!("{} {what}", t.target), value, whisker: None, color });
                    }
                }
            }
            (phase, bars)
        })
        .filter(|(_, bars)| !bars.is_empty())
        .collect();
    if panels.is_empty() {
        return Ok(None);
    }
    bar_panels("Cache lines flushed and fences per operation", &caption(r), &panels, false).map(Some)
}

fn panels(
    r: &Report,
    bar: impl Fn(&crate::report::TargetFigures, &crate::report::PhaseFigures) -> Bar,
) -> Vec<(String, Vec<Bar>)> {
    r.phase_names()
        .into_iter()
        .map(|phase| {
            let bars = r
                .targets
                .iter()
                .filter_map(|t| t.phases.iter().find(|p| p.phase == phase).map(|p| bar(t, p)))
                .collect();
            (phase, bars)
        })
        .collect()
}

fn bar_panels(title: &str, caption: &str, panels: &[(String, Vec<Bar>)], log: bool) -> Result<String> {
    let rows = panels.iter().map(|(_, b)| b.len()).max().unwrap_or(0);
    if panels.is_empty() || rows == 0 {
        bail!("nothing to plot");
    }
    let cols = panels.len().min(3);
    let grid_rows = panels.len().div_ceil(cols);
    let panel_h = 90 + 24 * rows as u32;
    let size = (420 * cols as u32 + 40, 90 + panel_h * grid_rows as u32);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        root.fill(&WHITE)?;
        let (header, body) = root.split_vertically(80);
        let top = Pos::new(HPos::Center, VPos::Top);
        let center = (size.0 / 2) as i32;
        header.draw_text(title, &(FONT, 22).into_font().style(FontStyle::Bold).color(&BLACK).pos(top), (center, 12))?;
        header.draw_text(caption, &(FONT, 12).into_font().color(&RGBColor(80, 80, 80)).pos(top), (center, 46))?;
        let areas = body.split_evenly((grid_rows, cols));
        for ((phase, bars), area) in panels.iter().zip(areas) {
            draw_panel(&area, phase, bars, log)?;
        }
        root.present()?;
    }
    Ok(svg)
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    phase: &str,
    bars: &[Bar],
    log: bool,
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let hi = bars.iter().map(|b| b.whisker.unwrap_or(b.value).max(b.value)).fold(0.0, f64::max).max(1e-3) * 1.15;
    let n = bars.len();
    let labels: Vec<String> = bars.iter().map(|b| b.label.clone()).collect();
    let y_fmt = move |y: &SegmentValue<usize>| match y {
        SegmentValue::CenterOf(i) if *i < labels.len() => labels[n - 1 - *i].clone(),
        _ => String::new(),
    };
    macro_rules! draw {
        ($chart:expr, $lo:expr) => {{
            let mut chart = $chart;
            chart
                .configure_mesh()
                .y_label_formatter(&y_fmt)
                .y_labels(n)
                .x_labels(5)
                .label_style((FONT, 12))
                .disable_y_mesh()
                .bold_line_style(BLACK.mix(0.12))
                .light_line_style(BLACK.mix(0.0))
                .draw()
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            for (i, b) in bars.iter().enumerate() {
                let row = n - 1 - i;
                let y0 = SegmentValue::Exact(row);
                let y1 = SegmentValue::Exact(row + 1);
                let mut rect = Rectangle::new([($lo, y0), (b.value.max($lo), y1)], b.color.mix(0.85).filled());
                rect.set_margin(3, 3, 0, 0);
                chart.draw_series(std::iter::once(rect)).map_err(|e| anyhow::anyhow!("{e}"))?;
                if let Some(w) = b.whisker {
                    let mid = SegmentValue::CenterOf(row);
                    chart
                        .draw_series(std::iter::once(PathElement::new(
                            vec![(b.value.max($lo), mid.clone()), (w.max($lo), mid)],
                            BLACK.stroke_width(2),
                        )))
                        .map_err(|e| anyhow::anyhow!("{e}"))?;
                }
            }
        }};
    }
    fn builder<'a, DB: DrawingBackend>(
        a: &'a DrawingArea<DB, plotters::coord::Shift>,
        phase: &str,
    ) -> ChartBuilder<'a, 'static, DB> {
        let mut b = ChartBuilder::on(a);
        b.caption(phase, (FONT, 16)).margin(8).x_label_area_size(24).y_label_area_size(110);
        b
    }
    if log {
        let lo = bars.iter().map(|b| b.value).filter(|v| *v > 0.0).fold(f64::INFINITY, f64::min).min(hi) / 2.0;
        let chart = builder(area, phase)
            .build_cartesian_2d((lo..hi).log_scale(), (0..n.saturating_sub(1)).into_segmented())
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        draw!(chart, lo);
    } else {
        let chart = builder(area, phase)
            .build_cartesian_2d(0.0..hi, (0..n.saturating_sub(1)).into_segmented())
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        draw!(chart, 0.0);
    }
    Ok(())
}

/// A line chart: `series` of (x, y) points over a shared x axis.
///
/// # Errors
/// No points; drawing errors.
pub fn series_svg(
    title: &str,
    caption: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[(String, Vec<(f64, f64)>)],
) -> Result<String> {
    let pts = || series.iter().flat_map(|(_, p)| p.iter());
    let (Some(x_lo), Some(x_hi)) = (pts().map(|p| p.0).reduce(f64::min), pts().map(|p| p.0).reduce(f64::max)) else {
        bail!("nothing to plot");
    };
    let y_hi = pts().map(|p| p.1).fold(0.0, f64::max).max(1e-3) * 1.1;
    let size = (960, 600);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        root.fill(&WHITE)?;
        let (header, body) = root.split_vertically(76);
        let top = Pos::new(HPos::Center, VPos::Top);
        header.draw_text(title, &(FONT, 22).into_font().style(FontStyle::Bold).color(&BLACK).pos(top), (480, 12))?;
        header.draw_text(caption, &(FONT, 12).into_font().color(&RGBColor(80, 80, 80)).pos(top), (480, 46))?;
        let pad = ((x_hi - x_lo) * 0.03).max(0.5);
        let mut chart = ChartBuilder::on(&body)
            .margin(16)
            .x_label_area_size(44)
            .y_label_area_size(70)
            .build_cartesian_2d((x_lo - pad)..(x_hi + pad), 0.0..y_hi)?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc(y_desc)
            .label_style((FONT, 14))
            .axis_desc_style((FONT, 15))
            .bold_line_style(BLACK.mix(0.12))
            .light_line_style(BLACK.mix(0.04))
            .draw()?;
        for (i, (name, points)) in series.iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            chart
                .draw_series(LineSeries::new(points.iter().copied(), color.stroke_width(2)).point_size(3))?
                .label(name.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], color.stroke_width(2)));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .label_font((FONT, 14))
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK.mix(0.4))
            .draw()?;
        root.present()?;
    }
    Ok(svg)
}

/// Rasterises an SVG document to PNG with the system's fonts (text is
/// left out where the system has none).
///
/// # Errors
/// An SVG resvg cannot parse; PNG encoding errors.
pub fn svg_to_png(svg: &str) -> Result<Vec<u8>> {
    let mut opt = resvg::usvg::Options::default();
    let fonts = opt.fontdb_mut();
    fonts.load_system_fonts();
    // The charts ask for the generic "sans-serif"; point it at a family
    // most Linux systems have (Debian's fonts-dejavu-core).
    fonts.set_sans_serif_family("DejaVu Sans");
    opt.font_family = "DejaVu Sans".into();
    let tree = resvg::usvg::Tree::from_str(svg, &opt).context("parsing the chart's SVG")?;
    let size = tree.size().to_int_size();
    let mut pixmap = resvg::tiny_skia::Pixmap::new(size.width(), size.height()).context("chart has no area")?;
    resvg::render(&tree, resvg::tiny_skia::Transform::identity(), &mut pixmap.as_mut());
    pixmap.encode_png().context("encoding PNG")
}

/// Writes `svg` to `stem.svg` and its rasterisation to `stem.png`.
///
/// # Errors
/// File errors; rasterisation errors.
pub fn write_svg_and_png(stem: &std::path::Path, svg: &str) -> Result<()> {
    let svg_path = stem.with_extension("svg");
    std::fs::write(&svg_path, svg).with_context(|| format!("writing {}", svg_path.display()))?;
    let png_path = stem.with_extension("png");
    std::fs::write(&png_path, svg_to_png(svg)?).with_context(|| format!("writing {}", png_path.display()))?;
    Ok(())
}

/// The write heat map (thesis Figures 6.1/6.3): one panel per target, a
/// cell per pool page in address order (64 per row), coloured by how many
/// operations wrote it on a log scale shared by the panels.
///
/// # Errors
/// No map; drawing errors.
pub fn heatmap_svg(maps: &[crate::heatmap::HeatMap]) -> Result<String> {
    const COLS: usize = 64;
    const CELL: u32 = 6;
    if maps.is_empty() {
        bail!("nothing to plot");
    }
    let max = maps.iter().map(|m| m.max).max().unwrap_or(1).max(1);
    let rows = maps.iter().map(|m| m.writes.len().div_ceil(COLS)).max().unwrap_or(1).max(1);
    let panel_w = COLS as u32 * CELL + 40;
    let size = (panel_w * maps.len() as u32 + 40, 120 + rows as u32 * CELL + 20);
    let heat = |c: u32| -> RGBColor {
        if c == 0 {
            return RGBColor(245, 245, 245);
        }
        // log scale: 1 -> pale yellow, max -> dark red
        let t = (f64::from(c).ln() / f64::from(max).ln().max(1e-9)).clamp(0.0, 1.0);
        let lerp = |a: f64, b: f64| (a + (b - a) * t) as u8;
        RGBColor(lerp(255.0, 120.0), lerp(237.0, 0.0), lerp(160.0, 20.0))
    };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        root.fill(&WHITE)?;
        let top = Pos::new(HPos::Center, VPos::Top);
        let center = (size.0 / 2) as i32;
        root.draw_text(
            "Writes per pool page while inserting (CDDS thesis Fig. 6.1/6.3)",
            &(FONT, 20).into_font().style(FontStyle::Bold).color(&BLACK).pos(top),
            (center, 10),
        )?;
        root.draw_text(
            &format!(
                "{} random 25-byte keys, {}-byte values; a cell is one 4 KiB page in address order, 64 per row; colour: operations that wrote it (log scale, 1 = pale, {max} = dark)",
                maps[0].keys, maps[0].value_bytes
            ),
            &(FONT, 12).into_font().color(&RGBColor(80, 80, 80)).pos(top),
            (center, 40),
        )?;
        for (i, m) in maps.iter().enumerate() {
            let x0 = 20 + i as i32 * panel_w as i32;
            root.draw_text(&m.target, &(FONT, 15).into_font().style(FontStyle::Bold).color(&BLACK), (x0, 70))?;
            root.draw_text(
                &format!(
                    "{} pages written, mean {:.1}, max {}; hottest 1% of pages: {:.0}% of writes",
                    m.pages_written,
                    m.mean,
                    m.max,
                    m.top1_share * 100.0
                ),
                &(FONT, 11).into_font().color(&BLACK),
                (x0, 90),
            )?;
            for (p, &c) in m.writes.iter().enumerate() {
                let (r, col) = ((p / COLS) as i32, (p % COLS) as i32);
                let (x, y) = (x0 + col * CELL as i32, 110 + r * CELL as i32);
                root.draw(&Rectangle::new([(x, y), (x + CELL as i32 - 1, y + CELL as i32 - 1)], heat(c).filled()))?;
            }
        }
        root.present()?;
    }
    Ok(svg)
}
