//! The CDDS microbenchmark (thesis §5.3–5.4): insert N distinct random
//! keys in random order, read every key in another random order, delete
//! every key; each operation is its own durable commit on durable targets.
//! Every get must find its key with the value put, and every delete must
//! remove one, so a target that loses data fails the run instead of
//! looking fast.

use anyhow::{ensure, Result};
use serde_json::json;

use super::{random_keys, PhaseMeter, PhaseSample, Rng, Workload};
use crate::targets::Target;

/// Shape of the microbenchmark.
#[derive(Clone, Debug)]
pub struct Micro {
    /// Keys inserted, read and deleted.
    pub keys: usize,
    /// Key length in bytes.
    pub key_bytes: usize,
    /// Value length in bytes.
    pub value_bytes: usize,
    /// Seed of keys and orders.
    pub seed: u64,
    keyset: Vec<Vec<u8>>,
}

impl Micro {
    /// A workload of `keys` random keys of `key_bytes` bytes with values of `value_bytes`.
    pub fn new(keys: usize, key_bytes: usize, value_bytes: usize, seed: u64) -> Micro {
        let keyset = random_keys(keys, key_bytes.max(8), seed);
        Micro { keys, key_bytes: key_bytes.max(8), value_bytes, seed, keyset }
    }

    fn value(&self, i: usize) -> Vec<u8> {
        // Distinct per key (first bytes) so a target mixing up values is caught.
        let mut v = vec![b'v'; self.value_bytes];
        let tag = (i as u64).to_le_bytes();
        let n = tag.len().min(v.len());
        v[..n].copy_from_slice(&tag[..n]);
        v
    }
}

impl Workload for Micro {
    fn name(&self) -> String {
        "micro".into()
    }

    fn params(&self) -> serde_json::Value {
        json!({"keys": self.keys, "key_bytes": self.key_bytes, "value_bytes": self.value_bytes, "seed": self.seed})
    }

    fn size_hint(&self) -> u64 {
        (self.keys * (self.key_bytes + self.value_bytes + 64)) as u64
    }

    fn scans(&self) -> bool {
        false
    }

    fn run(&self, t: &mut dyn Target, run: usize) -> Result<Vec<PhaseSample>> {
        let n = self.keyset.len();
        // Keys and values side by side in two flat buffers: a `Vec` per
        // key and per value cost each operation two more dependent cache
        // misses (the `Vec`'s header, then its bytes) in the harness, for
        // every target alike (session 20).
        let (kb, vb) = (self.key_bytes, self.value_bytes);
        let mut keys = Vec::with_capacity(n * kb);
        for k in &self.keyset {
            keys.extend_from_slice(k);
        }
        let mut vals = Vec::with_capacity(n * vb);
        for i in 0..n {
            vals.extend_from_slice(&self.value(i));
        }
        let key = |i: usize| &keys[i * kb..(i + 1) * kb];
        let value = |i: usize| &vals[i * vb..(i + 1) * vb];
        let order = Rng::seed_from_u64(self.seed ^ (run as u64).wrapping_mul(0x51)).permutation(n);
        let mut m = PhaseMeter::start("put", t);
        for &i in &order {
            t.put(key(i), value(i))?;
            m.done("put");
        }
        let put = m.finish(t);

        let order = Rng::seed_from_u64(self.seed ^ 0x5555 ^ (run as u64).wrapping_mul(0x51)).permutation(n);
        let mut buf = Vec::with_capacity(self.value_bytes);
        let mut m = PhaseMeter::start("get", t);
        let mut wrong = 0usize;
        for &i in &order {
            let found = t.get(key(i), &mut buf)?;
            m.done("get");
            // Length and the key's tag: cheap enough not to distort the timing.
            let want = value(i);
            let tag = want.len().min(8);
            wrong += usize::from(!found || buf.len() != want.len() || buf[..tag] != want[..tag]);
        }
        let get = m.finish(t);
        ensure!(wrong == 0, "{wrong} of {n} gets did not return the value put");

        let mut m = PhaseMeter::start("delete", t);
        let mut missing = 0usize;
        for &i in &order {
            missing += usize::from(!t.delete(key(i))?);
            m.done("delete");
        }
        let delete = m.finish(t);
        ensure!(missing == 0, "{missing} of {n} deletes found no key");
        Ok(vec![put, get, delete])
    }
}
