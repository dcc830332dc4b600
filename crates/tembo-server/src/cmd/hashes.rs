//! (being written)

use super::Spec;

pub const COMMANDS: &[Spec] = &[];
