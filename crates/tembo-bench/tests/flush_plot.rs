//! The chart of the committed sample report (`docs/results/flush.json`):
//! the SVG is well-formed, has one line per instruction with a vertex per
//! object size, a legend naming each instruction, the size labels of a log₂
//! axis, the title and the machine. Guards the picture in `docs/results/`
//! against plotters changes and against the report format drifting from
//! what the chart reads.

use std::collections::HashSet;
use std::path::PathBuf;

use tembo_bench::flush::{legend_label, render_svg, FlushReport, PLOT_TITLE};

fn sample_report() -> FlushReport {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/results/flush.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not a flush report: {e}", path.display()))
}

/// Checks that `doc` is well-formed XML as far as an SVG writer can get it
/// wrong: one root `<svg>` element, every tag closed in order, quoted
/// attributes, only the predefined or numeric entities. Returns the
/// elements as (name, attribute text) in document order.
fn check_well_formed(doc: &str) -> Vec<(String, String)> {
    let mut elements = Vec::new();
    let mut open: Vec<String> = Vec::new();
    let mut roots = 0;
    let mut rest = doc.trim();
    if let Some(after) = rest.strip_prefix("<?xml") {
        rest = &after[after.find("?>").expect("unterminated XML declaration") + 2..];
    }
    while let Some(lt) = rest.find('<') {
        check_text(&rest[..lt]);
        assert!(lt == 0 || !open.is_empty(), "text outside the root element: {:?}", &rest[..lt]);
        let gt = rest[lt..].find('>').map(|i| lt + i).expect("unterminated tag");
        let tag = &rest[lt + 1..gt];
        rest = &rest[gt + 1..];
        if let Some(name) = tag.strip_prefix('/') {
            let top = open.pop().unwrap_or_else(|| panic!("</{name}> closes nothing"));
            assert_eq!(top, name.trim(), "</{name}> closes <{top}>");
            continue;
        }
        assert!(!tag.starts_with('!') && !tag.starts_with('?'), "unexpected markup <{tag}>");
        let (tag, self_closing) = match tag.strip_suffix('/') {
            Some(t) => (t, true),
            None => (tag, false),
        };
        let (name, attrs) = tag.split_once(char::is_whitespace).unwrap_or((tag, ""));
        assert!(
            !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == ':'),
            "{name:?}"
        );
        check_attributes(name, attrs);
        if open.is_empty() {
            roots += 1;
            assert_eq!(name, "svg", "the root element");
        }
        elements.push((name.to_string(), attrs.to_string()));
        if !self_closing {
            open.push(name.to_string());
        }
    }
    assert!(rest.trim().is_empty(), "text after the root element: {rest:?}");
    assert!(open.is_empty(), "unclosed elements: {open:?}");
    assert_eq!(roots, 1, "one root element");
    elements
}

/// Attributes are `name="value"` pairs with checked text in the values.
fn check_attributes(element: &str, mut attrs: &str) {
    let mut seen = HashSet::new();
    loop {
        attrs = attrs.trim_start();
        if attrs.is_empty() {
            return;
        }
        let eq = attrs.find('=').unwrap_or_else(|| panic!("<{element}>: attribute without value: {attrs:?}"));
        let name = attrs[..eq].trim();
        assert!(seen.insert(name.to_string()), "<{element}>: attribute {name} twice");
        let value = &attrs[eq + 1..];
        let quote = value.chars().next().filter(|q| *q == '"' || *q == '\'');
        let quote = quote.unwrap_or_else(|| panic!("<{element}>: unquoted {name}"));
        let end = value[1..].find(quote).unwrap_or_else(|| panic!("<{element}>: unterminated {name}"));
        check_text(&value[1..=end]);
        assert!(!value[1..=end].contains('<'), "<{element}>: '<' in {name}");
        attrs = &value[end + 2..];
    }
}

/// Character data: no stray `<`, every `&` starts a known entity.
fn check_text(text: &str) {
    assert!(!text.contains('<'), "{text:?}");
    for (i, _) in text.match_indices('&') {
        let entity = &text[i..text[i..].find(';').map_or(text.len(), |e| i + e + 1)];
        let known = ["&lt;", "&gt;", "&amp;", "&quot;", "&apos;"].contains(&entity)
            || (entity.starts_with("&#") && entity.len() > 3 && entity.ends_with(';'));
        assert!(known, "bad entity {entity:?} in {text:?}");
    }
}

/// The attribute `name` of an element's attribute text.
fn attr<'a>(attrs: &'a str, name: &str) -> Option<&'a str> {
    let start = attrs.find(&format!("{name}=\""))? + name.len() + 2;
    attrs[start..].find('"').map(|end| &attrs[start..start + end])
}

/// The text of every `<text>` element, trimmed.
fn texts(doc: &str) -> Vec<String> {
    doc.split("<text")
        .skip(1)
        .map(|t| t[t.find('>').unwrap() + 1..t.find("</text>").unwrap()].trim().to_string())
        .collect()
}

#[test]
fn the_committed_report_renders_as_a_chart() {
    let report = sample_report();
    assert!(report.sweeps.len() >= 2, "the sample has several instructions");
    let svg = render_svg(&report).unwrap();
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("flush.svg");
    std::fs::write(&out, &svg).unwrap();

    let elements = check_well_formed(&svg);
    assert!(elements[0].1.contains("xmlns=\"http://www.w3.org/2000/svg\""), "{:?}", elements[0]);

    // One line per instruction: a polyline through one vertex per object
    // size, each in its own colour (axes and legend samples have 2 or 3).
    let lines: Vec<(&str, usize)> = elements
        .iter()
        .filter(|(name, _)| name == "polyline")
        .map(|(_, a)| (attr(a, "stroke").unwrap_or(""), attr(a, "points").unwrap_or("").split_whitespace().count()))
        .filter(|(_, vertices)| *vertices > 3)
        .collect();
    assert_eq!(lines.len(), report.sweeps.len(), "{lines:?}");
    for ((_, vertices), sweep) in lines.iter().zip(&report.sweeps) {
        assert_eq!(*vertices, sweep.points.len(), "{}", sweep.instruction);
    }
    let colours: HashSet<&str> = lines.iter().map(|(c, _)| *c).collect();
    assert_eq!(colours.len(), lines.len(), "one colour per instruction: {lines:?}");

    let texts = texts(&svg);
    let has = |s: &str| texts.iter().any(|t| t == s);
    for sweep in &report.sweeps {
        let label = legend_label(sweep);
        assert!(label.starts_with(&sweep.instruction));
        assert!(has(&label), "legend entry {label:?} missing from {texts:?}");
    }
    for size in ["64 B", "4 KiB", "1 MiB", "64 MiB"] {
        assert!(has(size), "x label {size:?} missing from {texts:?}");
    }
    assert!(has(PLOT_TITLE), "{texts:?}");
    let caption = texts.iter().find(|t| t.contains(&report.machine.kernel)).expect("a caption naming the kernel");
    assert!(caption.contains(&report.machine.cpu_model), "{caption}");
    assert!(texts.iter().any(|t| t.contains("million cache lines")), "y axis description missing: {texts:?}");
}

#[test]
#[should_panic(expected = "closes <g>")]
fn the_checker_rejects_unbalanced_tags() {
    check_well_formed("<svg><g></svg>");
}

#[test]
#[should_panic(expected = "bad entity")]
fn the_checker_rejects_raw_ampersands() {
    check_well_formed("<svg><text>A & B</text></svg>");
}
