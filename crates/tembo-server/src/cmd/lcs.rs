//! LCS: the longest common subsequence of two strings (Redis 7.0), as the
//! string, its length (LEN), or the matching ranges (IDX, with MINMATCHLEN
//! and WITHMATCHLEN), found by the same dynamic programme and the same
//! backward walk as Redis so that ties resolve to the same answer.

use super::args::{int, is};
use super::{CmdError, CmdResult, Spec};
use crate::encoding::Kind;
use crate::exec::Ctx;
use crate::resp::Reply;

pub const COMMANDS: &[Spec] = &[Spec {
    name: "lcs",
    arity: -3,
    flags: &["readonly"],
    keys: (1, 2, 1),
    group: "string",
    summary: "LCS key1 key2 [LEN] [IDX] [MINMATCHLEN len] [WITHMATCHLEN]: longest common subsequence.",
    run: lcs,
}];

fn lcs(cx: &mut Ctx, a: &[Vec<u8>]) -> CmdResult {
    let mut values = Vec::with_capacity(2);
    for key in &a[1..3] {
        match cx.lookup(key)? {
            Some(m) if m.kind != Kind::String => {
                return Err(CmdError::err("The specified keys must contain string values"))
            }
            m => values.push(m.map_or_else(Vec::new, |m| m.value)),
        }
    }
    let (mut get_len, mut get_idx, mut with_len, mut min_len) = (false, false, false, 0u64);
    let mut j = 3;
    while j < a.len() {
        if is(&a[j], "idx") {
            get_idx = true;
        } else if is(&a[j], "len") {
            get_len = true;
        } else if is(&a[j], "withmatchlen") {
            with_len = true;
        } else if is(&a[j], "minmatchlen") && j + 1 < a.len() {
            min_len = int(&a[j + 1])?.max(0) as u64;
            j += 1;
        } else {
            return Err(CmdError::syntax());
        }
        j += 1;
    }
    if get_idx && get_len {
        return Err(CmdError::err("If you want both the length and indexes, please just use IDX."));
    }
    let (x, y) = (&values[0], &values[1]);
    let cells = (x.len() as u64 + 1).saturating_mul(y.len() as u64 + 1);
    if cells.saturating_mul(4) > cx.st.shared.max_bulk() as u64 {
        return Err(CmdError::err("Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len"));
    }
    let table = Table::new(x, y);
    let total = table.at(x.len(), y.len());
    if get_len {
        return Ok(Reply::Int(total as i64));
    }
    let (text, matches) = table.walk(x, y, min_len, with_len);
    if get_idx {
        return Ok(Reply::Map(vec![
            (Reply::bulk("matches"), Reply::Array(matches)),
            (Reply::bulk("len"), Reply::Int(total as i64)),
        ]));
    }
    Ok(Reply::Bulk(text))
}

/// LCS lengths of every pair of prefixes.
struct Table {
    cols: usize,
    cells: Vec<u32>,
}

impl Table {
    fn new(x: &[u8], y: &[u8]) -> Table {
        let cols = y.len() + 1;
        let mut cells = vec![0u32; (x.len() + 1) * cols];
        for i in 1..=x.len() {
            for j in 1..=y.len() {
                cells[i * cols + j] = if x[i - 1] == y[j - 1] {
                    cells[(i - 1) * cols + j - 1] + 1
                } else {
                    cells[(i - 1) * cols + j].max(cells[i * cols + j - 1])
                };
            }
        }
        Table { cols, cells }
    }

    fn at(&self, i: usize, j: usize) -> u32 {
        self.cells[i * self.cols + j]
    }

    /// Walks back from the end: the common subsequence, and the matching
    /// ranges (last first, as Redis emits them) at least `min_len` long.
    fn walk(&self, x: &[u8], y: &[u8], min_len: u64, with_len: bool) -> (Vec<u8>, Vec<Reply>) {
        let mut text = vec![0u8; self.at(x.len(), y.len()) as usize];
        let mut idx = text.len();
        let mut matches = Vec::new();
        // The open range: (x start, x end, y start, y end).
        let mut open: Option<(usize, usize, usize, usize)> = None;
        let (mut i, mut j) = (x.len(), y.len());
        while i > 0 && j > 0 {
            let mut emit = false;
            if x[i - 1] == y[j - 1] {
                text[idx - 1] = x[i - 1];
                match &mut open {
                    None => open = Some((i - 1, i - 1, j - 1, j - 1)),
                    Some(r) if r.0 == i && r.2 == j => {
                        r.0 -= 1;
                        r.2 -= 1;
                    }
                    Some(_) => emit = true,
                }
                if open.is_some_and(|r| r.0 == 0 || r.2 == 0) {
                    emit = true;
                }
                idx -= 1;
                i -= 1;
                j -= 1;
            } else {
                if self.at(i - 1, j) > self.at(i, j - 1) {
                    i -= 1;
                } else {
                    j -= 1;
                }
                emit |= open.is_some();
            }
            if emit {
                if let Some((xs, xe, ys, ye)) = open.take() {
                    let len = (xe - xs + 1) as u64;
                    if min_len == 0 || len >= min_len {
                        let pair = |s: usize, e: usize| Reply::Array(vec![Reply::Int(s as i64), Reply::Int(e as i64)]);
                        let mut m = vec![pair(xs, xe), pair(ys, ye)];
                        if with_len {
                            m.push(Reply::Int(len as i64));
                        }
                        matches.push(Reply::Array(m));
                    }
                }
            }
        }
        (text, matches)
    }
}
