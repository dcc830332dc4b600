//! Progress bars for runs longer than a few seconds.
//!
//! Bars go to stderr, so stdout stays a clean table (or JSON) for pipes, and
//! they are hidden when stderr is not a terminal (CI logs, tests) or when
//! the caller turns them off.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Whether and where to draw progress.
#[derive(Clone, Copy, Debug)]
pub struct Progress {
    enabled: bool,
}

impl Progress {
    /// Draws bars if stderr is a terminal.
    pub fn auto() -> Progress {
        Progress { enabled: std::io::stderr().is_terminal() }
    }

    /// Never draws anything.
    pub fn hidden() -> Progress {
        Progress { enabled: false }
    }

    /// A bar of `len` steps labelled `what` (hidden if progress is off).
    pub fn bar(&self, len: u64, what: &str) -> ProgressBar {
        if !self.enabled {
            return ProgressBar::hidden();
        }
        let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
        let style = ProgressStyle::with_template("{prefix:>24} [{bar:30}] {pos}/{len} {msg} ({elapsed})")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
        bar.set_style(style);
        bar.set_prefix(what.to_string());
        bar
    }
}
