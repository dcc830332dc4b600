//! `std::collections::BTreeMap` as the volatile reference: the cost of the
//! same ordered map with nothing persisted, in the same process and run.

use std::collections::BTreeMap;

use anyhow::Result;

use super::Target;

#[derive(Default)]
pub(super) struct MapTarget {
    map: BTreeMap<Vec<u8>, Vec<u8>>,
    /// A scan's value buffer.
    scratch: Vec<u8>,
}

impl Target for MapTarget {
    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.map.insert(key.to_vec(), value.to_vec());
        Ok(())
    }

    fn get(&mut self, key: &[u8], buf: &mut Vec<u8>) -> Result<bool> {
        // A copy out, as every other target's get makes.
        match self.map.get(key) {
            Some(v) => {
                buf.clear();
                buf.extend_from_slice(v);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn delete(&mut self, key: &[u8]) -> Result<bool> {
        Ok(self.map.remove(key).is_some())
    }

    fn scan(&mut self, start: &[u8], n: usize) -> Result<usize> {
        let mut count = 0;
        for (_, v) in self.map.range(start.to_vec()..).take(n) {
            self.scratch.clear();
            self.scratch.extend_from_slice(v);
            std::hint::black_box(&self.scratch);
            count += 1;
        }
        Ok(count)
    }

    fn mode(&self) -> String {
        "volatile (DRAM)".into()
    }
}
