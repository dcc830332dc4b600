//! What the range tests share: a tree in memory, key spaces of three
//! shapes, and bounds drawn from in and between their keys.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use tembo_cdds::{Limits, Op, Tree};
use tembo_pmem::{Pool, PoolOptions};

/// What a tree should hold.
pub type Model = BTreeMap<Vec<u8>, Vec<u8>>;

pub fn tree() -> Tree {
    let pool =
        Pool::in_memory(&PoolOptions { size: 8 << 20, max_size: Some(256 << 20), ..PoolOptions::default() }).unwrap();
    Tree::create(Arc::new(pool), Limits::default()).unwrap()
}

/// Key `i` of a space where neighbours share long prefixes (`shape` 0), are
/// short and binary (1), or vary in length (2).
pub fn key(i: u32, shape: u8) -> Vec<u8> {
    match shape {
        0 => format!("user:{i:08}:tail").into_bytes(),
        1 => i.to_be_bytes().to_vec(),
        _ => format!("k{}", i * 7).into_bytes(),
    }
}

/// A bound drawn from keys in and between the tree's keys, and from odd
/// ones: the empty key, a bare shared prefix, all-0xFF.
pub fn bound(sel: u8, i: u32, shape: u8) -> Bound<Vec<u8>> {
    let k = match i % 11 {
        0 => Vec::new(),
        1 => b"user:".to_vec(),
        2 => vec![0xFF; 12],
        3 => {
            let mut k = key(i, shape);
            k.push(0);
            k
        }
        4 => {
            let mut k = key(i, shape);
            k.pop();
            k
        }
        _ => key(i, shape),
    };
    match sel % 3 {
        0 => Bound::Unbounded,
        1 => Bound::Included(k),
        _ => Bound::Excluded(k),
    }
}

/// Keys `0..n` of `shape` (value: the index), in batches of 64.
pub fn load(t: &Tree, m: &mut Model, n: u32, shape: u8) {
    for chunk in (0..n).collect::<Vec<_>>().chunks(64) {
        let owned: Vec<(Vec<u8>, Vec<u8>)> = chunk.iter().map(|&i| (key(i, shape), i.to_le_bytes().to_vec())).collect();
        let ops: Vec<Op<'_>> = owned.iter().map(|(k, v)| Op::Put(k, v)).collect();
        t.write(&ops).unwrap();
        m.extend(owned);
    }
}

/// Deletes (`true`) or overwrites with "new" each key of `ops`, one write each.
pub fn churn(t: &Tree, m: &mut Model, ops: Vec<(u32, bool)>, shape: u8) {
    for (i, delete) in ops {
        let k = key(i, shape);
        if delete {
            t.write(&[Op::Delete(&k)]).unwrap();
            m.remove(&k);
        } else {
            t.write(&[Op::Put(&k, b"new")]).unwrap();
            m.insert(k, b"new".to_vec());
        }
    }
}
