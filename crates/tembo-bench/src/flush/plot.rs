//! The flush sweep as a picture: an SVG line chart of a [`FlushReport`]
//! (the thesis' Figure 5.1).
//!
//! Why it exists: the table of [`render_table`](super::render_table) gives
//! exact numbers but hides the shape that matters — where each instruction
//! stops gaining from larger objects, and how far apart the instructions
//! are. The chart is made from the report alone, so a saved JSON report
//! (`docs/results/flush.json`) can be drawn again without measuring again.
//!
//! x is the object size on a logarithmic axis ticked at powers of two and
//! labelled in bytes (`64 B`, `4 KiB`, `1 MiB`, …), y is millions of cache
//! lines flushed per second, one line per instruction.
//!
//! Drawn with plotters' SVG backend without any of its font features: text
//! goes into the file as `<text>` elements for the viewer to render, and
//! plotters only estimates text widths for its layout, so neither building
//! nor running this needs a system font library (fontconfig, FreeType).

use std::f64::consts::SQRT_2;

use anyhow::{bail, Result};
use plotters::coord::combinators::BindKeyPoints;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::table::size_label;
use super::{FlushReport, InstructionSweep};

/// The chart's title.
pub const TITLE: &str = "Cache-line flushes per second by object size";

/// Width and height of the picture, in SVG user units (pixels).
const SIZE: (u32, u32) = (960, 600);
/// Height of the header band holding the title and the machine caption.
const HEADER: u32 = 76;
/// Line colours, one per instruction in report order (colour-blind safe
/// Okabe–Ito colours); cycled if a report has more sweeps.
const COLORS: [RGBColor; 5] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
];
const FONT: &str = "sans-serif";

/// Renders the report's sweeps as an SVG document: title, a caption naming
/// the machine, log₂ x axis of object sizes, y axis of millions of cache
/// lines per second, one line (with a marker per object size) per flush
/// instruction, and a legend.
///
/// # Errors
/// A report without any point to draw; a drawing error from plotters.
pub fn render_svg(r: &FlushReport) -> Result<String> {
    let lines: Vec<Vec<(f64, f64)>> = r.sweeps.iter().map(series).collect();
    let all = || lines.iter().flatten();
    let Some((x_lo, x_hi)) = bounds(all().map(|p| p.0)) else {
        bail!("the report has no sweep point to plot (mode {:?}, {} sweeps)", r.mode, r.sweeps.len());
    };
    let y_max = all().map(|p| p.1).fold(0.0, f64::max);
    let y_top = if y_max > 0.0 { y_max * 1.1 } else { 1.0 };
    let (bold_ticks, light_ticks) = size_ticks(x_lo.log2(), x_hi.log2());
    // Half a power of two of room on either side, so that the end markers
    // are not drawn on the frame.
    let x_range = ((x_lo / SQRT_2)..(x_hi * SQRT_2))
        .log_scale()
        .with_key_points(bold_ticks.into_iter().map(f64::exp2).collect())
        .with_light_points(light_ticks.into_iter().map(f64::exp2));

    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE)?;
        let (header, body) = root.split_vertically(HEADER);
        let center = (SIZE.0 / 2) as i32;
        let top = Pos::new(HPos::Center, VPos::Top);
        header.draw_text(TITLE, &(FONT, 26).into_font().style(FontStyle::Bold).color(&BLACK).pos(top), (center, 14))?;
        header.draw_text(&caption(r), &(FONT, 16).into_font().color(&RGBColor(80, 80, 80)).pos(top), (center, 48))?;

        let mut chart = ChartBuilder::on(&body)
            .margin_left(16)
            .margin_right(28)
            .margin_bottom(12)
            .x_label_area_size(50)
            .y_label_area_size(76)
            .build_cartesian_2d(x_range, 0.0..y_top)?;
        let x_label = |bytes: &f64| size_label(bytes.round() as u64);
        let y_label = |v: &f64| if y_top >= 20.0 { format!("{v:.0}") } else { format!("{v:.1}") };
        chart
            .configure_mesh()
            .x_desc("object size (log₂ scale)")
            .y_desc("million cache lines flushed per second")
            .x_label_formatter(&x_label)
            .y_label_formatter(&y_label)
            .label_style((FONT, 15))
            .axis_desc_style((FONT, 17))
            .bold_line_style(BLACK.mix(0.15))
            .light_line_style(BLACK.mix(0.05))
            .draw()?;

        for (i, (sw, pts)) in r.sweeps.iter().zip(lines).enumerate() {
            let color = COLORS[i % COLORS.len()];
            chart
                .draw_series(LineSeries::new(pts, color.stroke_width(2)).point_size(3))?
                .label(legend_label(sw))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], color.stroke_width(2)));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .label_font((FONT, 16))
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK.mix(0.4))
            .draw()?;
        root.present()?;
    }
    Ok(svg)
}

/// What the legend calls a sweep: `clwb (+sfence)`, as the table's header.
pub fn legend_label(sw: &InstructionSweep) -> String {
    format!("{} (+{})", sw.instruction, sw.fence)
}

/// The line under the title: the machine, and how the figures were taken.
fn caption(r: &FlushReport) -> String {
    let m = &r.machine;
    format!(
        "{} ({} CPUs), kernel {} — {} run, {} region of {}, median of {} passes",
        m.cpu_model,
        m.cpus,
        m.kernel,
        r.mode,
        size_label(r.region_bytes),
        r.region_backing,
        r.passes
    )
}

/// One sweep as (object bytes, million lines per second); points that
/// cannot be drawn on a log axis or at all (no size, a non-finite rate) are
/// left out.
fn series(sw: &InstructionSweep) -> Vec<(f64, f64)> {
    sw.points
        .iter()
        .filter(|p| p.object_bytes > 0 && p.lines_per_sec.is_finite())
        .map(|p| (p.object_bytes as f64, p.lines_per_sec / 1e6))
        .collect()
}

/// The smallest and largest value, if any.
fn bounds(values: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    values.fold(None, |acc, v| match acc {
        None => Some((v, v)),
        Some((lo, hi)) => Some((lo.min(v), hi.max(v))),
    })
}

/// Tick positions (log₂ of a size) for sizes from 2^lo to 2^hi: labelled
/// ticks at every power of two when that makes at most 12 labels, else at
/// every even power (64 B, 256 B, 1 KiB, 4 KiB, …) with grid lines only at
/// the odd ones.
fn size_ticks(lo: f64, hi: f64) -> (Vec<f64>, Vec<f64>) {
    let (lo, hi) = (lo.ceil() as i32, hi.floor() as i32);
    let all: Vec<i32> = (lo..=hi).collect();
    if all.len() <= 12 {
        return (all.into_iter().map(f64::from).collect(), Vec::new());
    }
    let (even, odd): (Vec<i32>, Vec<i32>) = all.into_iter().partition(|e| e % 2 == 0);
    (even.into_iter().map(f64::from).collect(), odd.into_iter().map(f64::from).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flush::SweepPoint;

    #[test]
    fn ticks_are_even_powers_for_the_full_range() {
        let (bold, light) = size_ticks(6.0, 26.0);
        assert_eq!(bold, vec![6.0, 8.0, 10.0, 12.0, 14.0, 16.0, 18.0, 20.0, 22.0, 24.0, 26.0]);
        assert_eq!(light.len(), 10);
        let labels: Vec<String> = bold.iter().map(|e| size_label(e.exp2() as u64)).collect();
        for l in ["64 B", "4 KiB", "1 MiB", "64 MiB"] {
            assert!(labels.iter().any(|x| x == l), "{l} missing from {labels:?}");
        }
        let (bold, light) = size_ticks(6.0, 12.0);
        assert_eq!(bold.len(), 7);
        assert!(light.is_empty());
    }

    /// The committed sample report with other sweeps and a CPU name that
    /// needs escaping in XML.
    fn report(sweeps: Vec<InstructionSweep>) -> FlushReport {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/results/flush.json");
        let mut r: FlushReport = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        r.machine.cpu_model = "Test CPU <&>".into();
        r.sweeps = sweeps;
        r
    }

    #[test]
    fn a_report_without_points_is_an_error() {
        let err = render_svg(&report(vec![])).unwrap_err();
        assert!(err.to_string().contains("no sweep point"), "{err}");
    }

    #[test]
    fn one_point_and_markup_in_names_are_drawn() {
        let sw = InstructionSweep {
            instruction: "clflush".into(),
            fence: "mfence".into(),
            points: vec![SweepPoint {
                object_bytes: 4096,
                objects: 1,
                lines_per_pass: 64,
                median_pass_secs: 1e-6,
                lines_per_sec: 64e6,
                gb_per_sec: 4.096,
            }],
        };
        let svg = render_svg(&report(vec![sw])).unwrap();
        assert!(svg.contains("clflush (+mfence)"), "{svg}");
        assert!(svg.contains("Test CPU &lt;&amp;&gt;"), "{svg}");
        assert!(svg.contains("\n4 KiB\n</text>"), "{svg}");
    }
}
