// What the `*_open` fuzz targets share (included by their logic files, so
// items only): where damage lands, what opening a damaged pool led to, how
// an input patches an image, and the seeded smoke loop the ordinary test
// suite runs in place of libFuzzer.

/// Where the damage lands: the first part of the heap, where an engine's
/// root, log, nodes and records live.
pub fn damage_span() -> usize {
    256 << 10
}

/// What opening a damaged image led to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Recovery and the checks ran; `violations` is what `check` found.
    Opened { violations: usize },
    /// Opening (or recovery, or a check) refused the pool with this error.
    Refused(String),
}

/// `base` with the input's patches applied: each 5 bytes are a 4-byte
/// little-endian offset (wrapped to the image) and the byte to store.
pub fn patched(base: &[u8], patches: &[u8]) -> Vec<u8> {
    let mut img = base.to_vec();
    for p in patches.chunks_exact(5) {
        let off = u32::from_le_bytes([p[0], p[1], p[2], p[3]]) as usize % img.len();
        img[off] = p[4];
    }
    img
}

/// Runs `open` on `cases` seeded inputs (a mode byte below `modes`, then
/// 1 to 5 patches, nine in ten within the heap's first `damage_span`
/// bytes) and returns (opened, refused); a panic names the case and input.
pub fn smoke(seed: u64, cases: usize, modes: u8, image_len: usize, open: impl Fn(&[u8]) -> Outcome) -> (usize, usize) {
    // splitmix64: seeded, and no dependency for the fuzz crate to carry.
    let mut state = seed;
    let mut next = move || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let (mut opened, mut refused) = (0, 0);
    for case in 0..cases {
        let mut input = vec![(case % modes as usize) as u8];
        for _ in 0..1 + next() % 5 {
            let off = if next() % 10 != 0 {
                4096 + (next() % damage_span() as u64) as usize
            } else {
                (next() % image_len as u64) as usize
            };
            input.extend_from_slice(&(off as u32).to_le_bytes());
            input.push(next() as u8);
        }
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| open(&input))) {
            Ok(Outcome::Opened { .. }) => opened += 1,
            Ok(Outcome::Refused(_)) => refused += 1,
            Err(_) => panic!("case {case} (seed {seed}): a panic on input {input:?}"),
        }
    }
    (opened, refused)
}
