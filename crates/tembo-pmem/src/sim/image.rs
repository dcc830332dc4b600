//! Building the pool a crash leaves behind.

use rand::Rng;

use crate::persist::CACHE_LINE_BYTES;

/// Which dirty data reaches the media in a crash.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CrashPolicy {
    /// Only what was flushed and fenced: every dirty line is lost.
    None,
    /// Every dirty line happened to be written back.
    All,
    /// Each dirty cache line independently written back or lost.
    RandomLines,
    /// Each dirty 8-byte word independently written back or lost (the
    /// hardware guarantees only 8-byte failure atomicity).
    RandomWords,
}

impl CrashPolicy {
    /// All policies.
    pub const ALL: [CrashPolicy; 4] =
        [CrashPolicy::None, CrashPolicy::All, CrashPolicy::RandomLines, CrashPolicy::RandomWords];

    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            CrashPolicy::None => "none",
            CrashPolicy::All => "all",
            CrashPolicy::RandomLines => "random-lines",
            CrashPolicy::RandomWords => "random-words",
        }
    }
}

impl std::fmt::Display for CrashPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Indexes of the cache lines whose CPU and media contents differ.
pub(crate) fn dirty_lines<'a>(cpu: &'a [u8], media: &'a [u8]) -> impl Iterator<Item = usize> + 'a {
    let line = CACHE_LINE_BYTES as usize;
    let n = cpu.len().max(media.len()).div_ceil(line);
    (0..n).filter(move |i| {
        let a = i * line;
        let c = cpu.get(a..(a + line).min(cpu.len())).unwrap_or(&[]);
        let m = media.get(a..(a + line).min(media.len())).unwrap_or(&[]);
        c != m
    })
}

/// The media image plus the dirty data `policy` lets through. The result has
/// the CPU image's length (a grown pool's new pages exist, zero on media).
pub fn build_crash_image(cpu: &[u8], media: &[u8], policy: CrashPolicy, rng: &mut impl Rng) -> Vec<u8> {
    if policy == CrashPolicy::None {
        return build_from_dirty(cpu, media, &[], policy, rng);
    }
    let dirty: Vec<usize> = dirty_lines(cpu, media).collect();
    build_from_dirty(cpu, media, &dirty, policy, rng)
}

/// [`build_crash_image`] with the dirty lines (`dirty_lines(cpu, media)`)
/// already known: the lines of one fence are the same under every policy.
pub(crate) fn build_from_dirty(
    cpu: &[u8],
    media: &[u8],
    dirty: &[usize],
    policy: CrashPolicy,
    rng: &mut impl Rng,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(cpu.len());
    out.extend_from_slice(&media[..media.len().min(cpu.len())]);
    out.resize(cpu.len(), 0);
    if policy == CrashPolicy::None {
        return out;
    }
    let line = CACHE_LINE_BYTES as usize;
    for &i in dirty {
        let a = i * line;
        if a >= cpu.len() {
            continue;
        }
        let b = (a + line).min(cpu.len());
        match policy {
            CrashPolicy::None => {}
            CrashPolicy::All => out[a..b].copy_from_slice(&cpu[a..b]),
            CrashPolicy::RandomLines => {
                if rng.gen_bool(0.5) {
                    out[a..b].copy_from_slice(&cpu[a..b]);
                }
            }
            CrashPolicy::RandomWords => {
                let mut w = a;
                while w < b {
                    let e = (w + 8).min(b);
                    if out[w..e] != cpu[w..e] && rng.gen_bool(0.5) {
                        out[w..e].copy_from_slice(&cpu[w..e]);
                    }
                    w = e;
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn policies_bound_the_image_between_media_and_cpu() {
        let media = vec![0u8; 512];
        let mut cpu = media.clone();
        cpu[3] = 1;
        cpu[130] = 2;
        cpu[200] = 3;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        assert_eq!(build_crash_image(&cpu, &media, CrashPolicy::None, &mut rng), media);
        assert_eq!(build_crash_image(&cpu, &media, CrashPolicy::All, &mut rng), cpu);
        for p in [CrashPolicy::RandomLines, CrashPolicy::RandomWords] {
            for _ in 0..20 {
                let img = build_crash_image(&cpu, &media, p, &mut rng);
                for i in 0..512 {
                    assert!(img[i] == media[i] || img[i] == cpu[i]);
                }
            }
        }
        assert_eq!(dirty_lines(&cpu, &media).collect::<Vec<_>>(), vec![0, 2, 3]);
    }

    #[test]
    fn random_words_can_tear_a_line_but_not_a_word() {
        let media = vec![0u8; 64];
        let cpu = vec![0xffu8; 64];
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let mut torn = false;
        for _ in 0..50 {
            let img = build_crash_image(&cpu, &media, CrashPolicy::RandomWords, &mut rng);
            for w in img.chunks(8) {
                assert!(w.iter().all(|b| *b == w[0]), "a word was torn");
            }
            torn |= img.chunks(8).any(|w| w[0] == 0) && img.chunks(8).any(|w| w[0] == 0xff);
        }
        assert!(torn);
    }
}
