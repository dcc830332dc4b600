//! # YCSB core workloads A–F, generated in-process from a seed
//!
//! Tembo's key-value benchmarks are meant to be read next to published YCSB
//! numbers, so they have to run YCSB's *core workloads*: the same key names,
//! the same load order, the same operation mix and the same key popularity.
//! Running YCSB itself would put a JVM, its thread pool and its measurement
//! code between the clock and the store; this module is instead a
//! dependency-free (std only) reimplementation of what YCSB 0.17.0's
//! `CoreWorkload` *generates*, so that a benchmark can draw its operations
//! in-process and replay exactly the same sequence from the same seed.
//!
//! ## What it promises
//! - **Determinism.** The same [`YcsbSpec`] yields the same load keys, the
//!   same run operations and the same values, on every call. Everything is
//!   integer arithmetic except the zipfian draws, which use `f64::powf`; a
//!   different platform's `libm` may round that in the last bit and so, very
//!   rarely, move one draw to a neighbouring item.
//! - **YCSB's keys.** [`key_name`] is `CoreWorkload.buildKeyName` with the
//!   default `insertorder=hashed` and `zeropadding=1`: `"user"` followed by
//!   the decimal `Utils.fnvhash64(keynum)`. [`load_keys`] inserts keynums
//!   `0..record_count` in order, like the load phase's `CounterGenerator(0)`.
//! - **YCSB's mixes.** The proportions, request distribution and scan
//!   lengths of `workloads/workloada` … `workloadf` (see [`Workload`]); the
//!   operation is chosen the way `DiscreteGenerator` does it.
//! - **YCSB's distributions.** `zipfian` is `ScrambledZipfianGenerator`
//!   (a [`Zipfian`] over 10 billion items with the precomputed
//!   ζ = [`SCRAMBLED_ZETAN`], hashed with FNV-64 and reduced modulo the item
//!   count — see [`ScrambledZipfian`]); `latest` is `SkewedLatestGenerator`
//!   over the insert counter ([`SkewedLatest`]). As in `CoreWorkload`, the
//!   scrambled zipfian of a workload with inserts is sized for
//!   `record_count + 2 × expected inserts + 1` items so that the popular keys
//!   do not move as keys are inserted, and a draw above the last inserted
//!   keynum is thrown away and drawn again (`nextKeynum`).
//! - **Inserts during the run** take keynums `record_count`,
//!   `record_count + 1`, … (`transactioninsertkeysequence`); reads, updates,
//!   scans and read-modify-writes only ever name keys that were loaded or
//!   inserted by an earlier operation. YCSB's `AcknowledgedCounterGenerator`
//!   exposes a key once its insert is acknowledged; one thread replays these
//!   operations in order, so here "acknowledged" means "emitted before".
//!
//! ## What it does not reproduce
//! - **Java's random streams.** YCSB draws from `java.util.Random` and
//!   `ThreadLocalRandom`; this module draws from its own [`Rng`]
//!   (xoshiro256** seeded by `SplitMix64`). The *distributions* are YCSB's, the
//!   individual sequences are not those of a particular YCSB run.
//! - **Fields.** YCSB records are 10 fields × 100 bytes; here a record is one
//!   value of [`YcsbSpec::value_bytes`] bytes (default 1000), made by
//!   [`value`]. Operations carry keys only: what an update or a
//!   read-modify-write writes is the caller's choice (the usual key-value
//!   mapping is a whole new value).
//! - **`int` truncation.** `CoreWorkload` narrows keynums to a Java `int`;
//!   this module keeps full 64-bit keynums, which only differs above 2³¹
//!   records.
//! - **Multiple client threads**: one sequence, for one thread.

use std::error::Error;
use std::fmt;
use std::str::FromStr;

// ---------------------------------------------------------------------------
// Keys
// ---------------------------------------------------------------------------

/// `Utils.FNV_OFFSET_BASIS_64`.
pub const FNV_OFFSET_BASIS_64: u64 = 0xCBF2_9CE4_8422_2325;
/// `Utils.FNV_PRIME_64`.
pub const FNV_PRIME_64: u64 = 1_099_511_628_211;

/// YCSB's `Utils.fnvhash64`: FNV-1 over the eight low-to-high bytes of a
/// Java `long`, then `Math.abs` (so `i64::MIN` stays `i64::MIN`, as in Java).
pub fn fnvhash64(val: i64) -> i64 {
    let mut val = val;
    let mut hash = FNV_OFFSET_BASIS_64 as i64;
    for _ in 0..8 {
        let octet = val & 0xff;
        val >>= 8; // arithmetic shift, as Java's `>>`
        hash ^= octet;
        hash = hash.wrapping_mul(FNV_PRIME_64 as i64);
    }
    hash.wrapping_abs()
}

/// The key of record `keynum`: `"user"` followed by the decimal
/// [`fnvhash64`] of the keynum, i.e. YCSB's `buildKeyName` with
/// `insertorder=hashed` and `zeropadding=1` (the defaults). The keynum is
/// read as a Java `long`. Keys are ASCII and at most 24 bytes long.
pub fn key_name(keynum: u64) -> Vec<u8> {
    format!("user{}", fnvhash64(keynum as i64)).into_bytes()
}

/// The keys of the load phase, in insert order: `key_name(0)`,
/// `key_name(1)`, …, `key_name(record_count - 1)`.
pub fn load_keys(spec: &YcsbSpec) -> LoadKeys {
    LoadKeys { next: 0, end: spec.record_count }
}

/// Iterator over the load phase's keys; see [`load_keys`].
#[derive(Debug, Clone)]
pub struct LoadKeys {
    next: u64,
    end: u64,
}

impl Iterator for LoadKeys {
    type Item = Vec<u8>;

    fn next(&mut self) -> Option<Vec<u8>> {
        if self.next >= self.end {
            return None;
        }
        let keynum = self.next;
        self.next += 1;
        Some(key_name(keynum))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        size_hint(self.end - self.next)
    }
}

fn size_hint(remaining: u64) -> (usize, Option<usize>) {
    let upper = usize::try_from(remaining).ok();
    (upper.unwrap_or(usize::MAX), upper)
}

// ---------------------------------------------------------------------------
// Values
// ---------------------------------------------------------------------------

/// A record value: `spec.value_bytes` printable ASCII bytes (`' '` to `'_'`),
/// determined by `spec.seed` and `counter` alone. Use any counter that tells
/// values apart, e.g. the keynum during the load and the operation's index
/// during the run.
pub fn value(spec: &YcsbSpec, counter: u64) -> Vec<u8> {
    let mut buf = vec![0; spec.value_bytes];
    fill_value(spec.seed, counter, &mut buf);
    buf
}

/// Fills `buf` with the bytes [`value`] would return for a spec with this
/// seed and `buf.len()` value bytes, without allocating.
pub fn fill_value(seed: u64, counter: u64, buf: &mut [u8]) {
    let mut state = mix64(mix64(seed ^ VALUE_STREAM) ^ counter);
    // Eight bytes of ' ' + 6 random bits each: 64 printable characters,
    // like YCSB's RandomByteIterator (' ' + 5 to 7 random bits). No byte
    // carries into the next, since 0x3f + 0x20 < 0x100.
    let mut next = || ((splitmix64(&mut state) & 0x3f3f_3f3f_3f3f_3f3f) + 0x2020_2020_2020_2020).to_le_bytes();
    let mut chunks = buf.chunks_exact_mut(8);
    for chunk in &mut chunks {
        chunk.copy_from_slice(&next());
    }
    let tail = chunks.into_remainder();
    let len = tail.len();
    tail.copy_from_slice(&next()[..len]);
}

// ---------------------------------------------------------------------------
// Random numbers
// ---------------------------------------------------------------------------

const VALUE_STREAM: u64 = 0x7661_6c75_6573_2121;

/// One step of `SplitMix64`: advances `state` and returns the next output.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    mix64(*state)
}

/// `SplitMix64`'s output function, a bijective 64-bit mixer.
fn mix64(z: u64) -> u64 {
    let z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    let z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A small, fast, seedable generator: xoshiro256** (Blackman and Vigna),
/// its state filled by `SplitMix64` from a 64-bit seed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    /// The generator for `seed`; equal seeds give equal sequences.
    pub fn seed_from_u64(seed: u64) -> Self {
        let mut sm = seed;
        // Four consecutive SplitMix64 outputs are never all zero.
        Rng { s: [splitmix64(&mut sm), splitmix64(&mut sm), splitmix64(&mut sm), splitmix64(&mut sm)] }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Uniform in `0..n` (`n > 0`), by multiply-shift (no modulo bias worth
    /// the name for the sizes benchmarks use).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// A random permutation of `0..n` (Fisher–Yates).
    pub fn permutation(&mut self, n: usize) -> Vec<usize> {
        let mut idx: Vec<usize> = (0..n).collect();
        for i in (1..n).rev() {
            idx.swap(i, self.below(i as u64 + 1) as usize);
        }
        idx
    }

    /// A uniform double in `[0, 1)` with 53 random bits, like Java's
    /// `Random.nextDouble`.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

// ---------------------------------------------------------------------------
// Distributions
// ---------------------------------------------------------------------------

/// YCSB's `UniformLongGenerator`: integers uniform in `[lb, ub]`, both
/// included (a 64-bit random number modulo the interval, so the bias is at
/// most interval / 2⁶⁴).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Uniform {
    lb: u64,
    /// `ub - lb + 1`; 0 stands for the whole `u64` range.
    interval: u64,
}

impl Uniform {
    /// Integers from `lb` to `ub`, both included.
    ///
    /// # Panics
    /// If `lb > ub`.
    pub fn new(lb: u64, ub: u64) -> Self {
        assert!(lb <= ub, "Uniform::new: lb {lb} > ub {ub}");
        Uniform { lb, interval: (ub - lb).wrapping_add(1) }
    }

    /// The next value.
    pub fn sample(&self, rng: &mut Rng) -> u64 {
        let r = rng.next_u64();
        if self.interval == 0 {
            r
        } else {
            self.lb + r % self.interval
        }
    }
}

/// YCSB's zipfian constant, `ZipfianGenerator.ZIPFIAN_CONSTANT`.
pub const ZIPFIAN_CONSTANT: f64 = 0.99;

/// ζ(n, θ) = Σ_{i=1..n} 1/i^θ, summed in the order YCSB sums it
/// (`ZipfianGenerator.zetastatic`). Costs `n` calls to `powf`.
pub fn zeta(n: u64, theta: f64) -> f64 {
    zeta_from(0, n, theta, 0.0)
}

/// ζ(n, θ) continued from `initial` = ζ(st, θ).
fn zeta_from(st: u64, n: u64, theta: f64, initial: f64) -> f64 {
    let mut sum = initial;
    for i in st..n {
        sum += 1.0 / ((i + 1) as f64).powf(theta);
    }
    sum
}

/// YCSB's `ZipfianGenerator`: the algorithm of Gray et al., "Quickly
/// Generating Billion-Record Synthetic Databases" (SIGMOD 1994). Item
/// `min` is the most popular, `min + 1` the next, and so on; P(rank i) =
/// (1/i^θ) / ζ(n, θ).
///
/// Like YCSB's, the generator can be asked for a larger item count than it
/// was built for ([`Zipfian::sample_with_count`]); ζ is then extended
/// incrementally. Also like YCSB's (whose `allowitemcountdecrease` is
/// false), a smaller count keeps the larger ζ, and η keeps using the item
/// count given at construction.
#[derive(Debug, Clone, PartialEq)]
pub struct Zipfian {
    /// The item count given at construction (YCSB's `items`).
    items: u64,
    base: u64,
    theta: f64,
    zeta2theta: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
    /// The item count `zetan` was summed over (`countforzeta`).
    count_for_zeta: u64,
}

impl Zipfian {
    /// Items `0..item_count` with zipfian constant `constant` (θ). Builds
    /// ζ(`item_count`, θ) from scratch: `item_count` calls to `powf`.
    ///
    /// # Panics
    /// If `constant` is not in (0, 1).
    pub fn new(item_count: u64, constant: f64) -> Self {
        Self::with_zetan(0, item_count, constant, zeta(item_count, constant))
    }

    /// Items `min..=max`.
    ///
    /// # Panics
    /// If `min > max`, if the range holds 2⁶⁴ items, or if `constant` is not
    /// in (0, 1).
    pub fn with_range(min: u64, max: u64, constant: f64) -> Self {
        let items = range_count(min, max);
        Self::with_zetan(min, items, constant, zeta(items, constant))
    }

    /// `item_count` items starting at `base`, with a precomputed
    /// `zetan` = ζ(`item_count`, `constant`).
    ///
    /// # Panics
    /// If `constant` is not in (0, 1).
    pub fn with_zetan(base: u64, item_count: u64, constant: f64, zetan: f64) -> Self {
        assert!(constant > 0.0 && constant < 1.0, "zipfian constant {constant} is not in (0, 1)");
        let theta = constant;
        let zeta2theta = zeta(2, theta);
        Zipfian {
            items: item_count,
            base,
            theta,
            zeta2theta,
            alpha: 1.0 / (1.0 - theta),
            zetan,
            eta: eta(item_count, theta, zeta2theta, zetan),
            count_for_zeta: item_count,
        }
    }

    /// The item count given at construction.
    pub fn item_count(&self) -> u64 {
        self.items
    }

    /// The next item, from the item count given at construction.
    pub fn sample(&mut self, rng: &mut Rng) -> u64 {
        self.sample_with_count(rng, self.items)
    }

    /// The next item from `base..base + item_count` (YCSB's
    /// `nextLong(itemcount)`), extending ζ first if `item_count` grew.
    pub fn sample_with_count(&mut self, rng: &mut Rng, item_count: u64) -> u64 {
        if item_count > self.count_for_zeta {
            self.zetan = zeta_from(self.count_for_zeta, item_count, self.theta, self.zetan);
            self.count_for_zeta = item_count;
            // YCSB recomputes eta from `items`, the count given at
            // construction, not from `itemcount`; kept for fidelity.
            self.eta = eta(self.items, self.theta, self.zeta2theta, self.zetan);
        }

        let u = rng.next_f64();
        let uz = u * self.zetan;
        if uz < 1.0 {
            return self.base;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return self.base + 1;
        }
        // `as` truncates toward zero and saturates, like Java's `(long)`.
        let offset = (item_count as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        self.base + offset
    }
}

fn eta(items: u64, theta: f64, zeta2theta: f64, zetan: f64) -> f64 {
    (1.0 - (2.0 / items as f64).powf(1.0 - theta)) / (1.0 - zeta2theta / zetan)
}

fn range_count(min: u64, max: u64) -> u64 {
    assert!(min <= max, "empty range {min}..={max}");
    match (max - min).checked_add(1) {
        Some(count) => count,
        None => panic!("range {min}..={max} holds 2^64 items"),
    }
}

/// `ScrambledZipfianGenerator.ITEM_COUNT`: the underlying zipfian is over
/// this many items (ten billion), whatever the key range.
pub const SCRAMBLED_ITEM_COUNT: u64 = 10_000_000_000;

/// `ScrambledZipfianGenerator.ZETAN`: ζ(10¹⁰, 0.99), precomputed by YCSB.
pub const SCRAMBLED_ZETAN: f64 = 26.469_028_201_783_02;

/// YCSB's `ScrambledZipfianGenerator` (zipfian constant 0.99): a
/// [`Zipfian`] over `0..=`[`SCRAMBLED_ITEM_COUNT`] with the precomputed
/// [`SCRAMBLED_ZETAN`], whose draw is hashed with [`fnvhash64`] and reduced
/// modulo the range's item count. The popular items are thus scattered over
/// the range, and stay where they are if the range is later read with
/// rejection (see the module documentation).
#[derive(Debug, Clone, PartialEq)]
pub struct ScrambledZipfian {
    gen: Zipfian,
    min: u64,
    item_count: u64,
}

impl ScrambledZipfian {
    /// Items `min..=max`.
    ///
    /// # Panics
    /// If `min > max` or if the range holds 2⁶⁴ items.
    pub fn new(min: u64, max: u64) -> Self {
        // YCSB: new ZipfianGenerator(0, ITEM_COUNT, 0.99, ZETAN), that is
        // ITEM_COUNT + 1 items.
        let gen = Zipfian::with_zetan(0, SCRAMBLED_ITEM_COUNT + 1, ZIPFIAN_CONSTANT, SCRAMBLED_ZETAN);
        ScrambledZipfian { gen, min, item_count: range_count(min, max) }
    }

    /// The next item.
    pub fn sample(&mut self, rng: &mut Rng) -> u64 {
        let rank = self.gen.sample(rng);
        // `unsigned_abs` only differs from Java's `%` of a negative number
        // if the hash were i64::MIN, and keeps the item in range then.
        self.min + fnvhash64(rank as i64).unsigned_abs() % self.item_count
    }
}

/// YCSB's `SkewedLatestGenerator`: keynums near the latest one are the most
/// popular. A draw is `last - z`, where `last` is the latest inserted keynum
/// and `z` a [`Zipfian`] draw over `last` items (the zipfian grows with the
/// insert counter, extending ζ incrementally).
#[derive(Debug, Clone, PartialEq)]
pub struct SkewedLatest {
    zipfian: Zipfian,
}

impl SkewedLatest {
    /// A generator for an insert counter whose latest value is `last`
    /// (YCSB: `new ZipfianGenerator(basis.lastValue())`). Costs `last` calls
    /// to `powf` to sum ζ.
    pub fn new(last: u64) -> Self {
        SkewedLatest { zipfian: Zipfian::new(last, ZIPFIAN_CONSTANT) }
    }

    /// The next keynum, in `0..=last`, where `last` is the latest inserted
    /// keynum now.
    pub fn sample(&mut self, rng: &mut Rng, last: u64) -> u64 {
        let z = self.zipfian.sample_with_count(rng, last);
        last.saturating_sub(z)
    }
}

// ---------------------------------------------------------------------------
// Workloads
// ---------------------------------------------------------------------------

/// YCSB's six core workloads, as in `workloads/workloada` … `workloadf`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Workload {
    /// Update heavy: 50 % reads, 50 % updates, zipfian.
    A,
    /// Read mostly: 95 % reads, 5 % updates, zipfian.
    B,
    /// Read only: 100 % reads, zipfian.
    C,
    /// Read latest: 95 % reads, 5 % inserts, latest.
    D,
    /// Short ranges: 95 % scans of 1 to 100 records, 5 % inserts, zipfian.
    E,
    /// Read-modify-write: 50 % reads, 50 % read-modify-writes, zipfian.
    F,
}

/// The share of each operation in a workload (YCSB's `*proportion`
/// properties); they sum to 1.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OperationMix {
    /// `readproportion`.
    pub read: f64,
    /// `updateproportion`.
    pub update: f64,
    /// `insertproportion`.
    pub insert: f64,
    /// `scanproportion`.
    pub scan: f64,
    /// `readmodifywriteproportion`.
    pub read_modify_write: f64,
}

/// How a workload picks the records it reads, updates or scans (YCSB's
/// `requestdistribution`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RequestDistribution {
    /// [`ScrambledZipfian`].
    Zipfian,
    /// [`SkewedLatest`] over the insert counter.
    Latest,
}

impl Workload {
    /// All six, in order.
    pub const ALL: [Workload; 6] = [Workload::A, Workload::B, Workload::C, Workload::D, Workload::E, Workload::F];

    /// The workload's operation proportions.
    pub fn mix(self) -> OperationMix {
        let none = OperationMix { read: 0.0, update: 0.0, insert: 0.0, scan: 0.0, read_modify_write: 0.0 };
        match self {
            Workload::A => OperationMix { read: 0.5, update: 0.5, ..none },
            Workload::B => OperationMix { read: 0.95, update: 0.05, ..none },
            Workload::C => OperationMix { read: 1.0, ..none },
            Workload::D => OperationMix { read: 0.95, insert: 0.05, ..none },
            Workload::E => OperationMix { scan: 0.95, insert: 0.05, ..none },
            Workload::F => OperationMix { read: 0.5, read_modify_write: 0.5, ..none },
        }
    }

    /// The workload's request distribution.
    pub fn request_distribution(self) -> RequestDistribution {
        match self {
            Workload::D => RequestDistribution::Latest,
            _ => RequestDistribution::Zipfian,
        }
    }

    /// The largest scan length (`maxscanlength`): 100 in workload E, YCSB's
    /// default 1000 elsewhere (where there are no scans). Scan lengths are
    /// uniform in `1..=max_scan_length` (`minscanlength` 1,
    /// `scanlengthdistribution=uniform`).
    pub fn max_scan_length(self) -> u64 {
        match self {
            Workload::E => 100,
            _ => 1000,
        }
    }

    /// YCSB's one-line description of the workload.
    pub fn description(self) -> &'static str {
        match self {
            Workload::A => "update heavy",
            Workload::B => "read mostly",
            Workload::C => "read only",
            Workload::D => "read latest",
            Workload::E => "short ranges",
            Workload::F => "read-modify-write",
        }
    }
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let letter = match self {
            Workload::A => "A",
            Workload::B => "B",
            Workload::C => "C",
            Workload::D => "D",
            Workload::E => "E",
            Workload::F => "F",
        };
        f.write_str(letter)
    }
}

impl FromStr for Workload {
    type Err = ParseWorkloadError;

    /// `"a"` … `"f"`, in either case, optionally prefixed by `"workload"`
    /// (YCSB's file names, e.g. `"workloada"`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let lower = s.trim().to_ascii_lowercase();
        let letter = lower.strip_prefix("workload").unwrap_or(&lower);
        match letter {
            "a" => Ok(Workload::A),
            "b" => Ok(Workload::B),
            "c" => Ok(Workload::C),
            "d" => Ok(Workload::D),
            "e" => Ok(Workload::E),
            "f" => Ok(Workload::F),
            _ => Err(ParseWorkloadError { input: s.to_owned() }),
        }
    }
}

/// A string that names no YCSB core workload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseWorkloadError {
    input: String,
}

impl fmt::Display for ParseWorkloadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown YCSB workload {:?} (expected one of a, b, c, d, e, f)", self.input)
    }
}

impl Error for ParseWorkloadError {}

/// What to generate: a workload, its sizes and the seed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct YcsbSpec {
    /// Which core workload.
    pub workload: Workload,
    /// Records inserted by the load phase (`recordcount`).
    pub record_count: u64,
    /// Operations of the run phase (`operationcount`).
    pub operation_count: u64,
    /// Bytes per value; YCSB's default record is `fieldcount` 10 ×
    /// `fieldlength` 100 = [`YcsbSpec::DEFAULT_VALUE_BYTES`].
    pub value_bytes: usize,
    /// Seed of every random choice.
    pub seed: u64,
}

impl YcsbSpec {
    /// YCSB's default record size: 10 fields of 100 bytes.
    pub const DEFAULT_VALUE_BYTES: usize = 1000;

    /// A spec with the default value size.
    pub fn new(workload: Workload, record_count: u64, operation_count: u64, seed: u64) -> Self {
        YcsbSpec { workload, record_count, operation_count, value_bytes: Self::DEFAULT_VALUE_BYTES, seed }
    }

    /// The load phase's keys; see [`load_keys`].
    pub fn load_keys(&self) -> LoadKeys {
        load_keys(self)
    }

    /// The run phase; see [`YcsbRun::new`].
    ///
    /// # Errors
    /// As [`YcsbRun::new`].
    pub fn run(&self) -> Result<YcsbRun, YcsbError> {
        YcsbRun::new(self)
    }
}

/// A spec the run phase cannot be generated from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum YcsbError {
    /// `record_count` is 0: there is no record to read, update or scan.
    /// (YCSB itself silently replaces a record count of 0 by 2³¹ − 1.)
    NoRecords,
    /// `record_count + operation_count` does not fit in a `u64`.
    TooManyKeys,
}

impl fmt::Display for YcsbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            YcsbError::NoRecords => f.write_str("a YCSB run needs at least one record"),
            YcsbError::TooManyKeys => f.write_str("record count + operation count overflow a u64"),
        }
    }
}

impl Error for YcsbError {}

/// The kind of a run-phase operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OpKind {
    /// Read one record.
    Read,
    /// Overwrite one record.
    Update,
    /// Insert a new record.
    Insert,
    /// Read a number of records in key order from a start key.
    Scan,
    /// Read one record, then overwrite it.
    ReadModifyWrite,
}

impl OpKind {
    /// YCSB's name of the operation, as in its reports.
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Read => "READ",
            OpKind::Update => "UPDATE",
            OpKind::Insert => "INSERT",
            OpKind::Scan => "SCAN",
            OpKind::ReadModifyWrite => "READ-MODIFY-WRITE",
        }
    }
}

impl fmt::Display for OpKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One run-phase operation, with the key it names.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum YcsbOp {
    /// Read the record.
    Read(Vec<u8>),
    /// Overwrite the record.
    Update(Vec<u8>),
    /// Insert this new key.
    Insert(Vec<u8>),
    /// Read this many records (1 or more), in key order, from the key.
    Scan(Vec<u8>, usize),
    /// Read the record, then overwrite it.
    ReadModifyWrite(Vec<u8>),
}

impl YcsbOp {
    /// The key the operation names (a scan's start key).
    pub fn key(&self) -> &[u8] {
        match self {
            YcsbOp::Read(key)
            | YcsbOp::Update(key)
            | YcsbOp::Insert(key)
            | YcsbOp::Scan(key, _)
            | YcsbOp::ReadModifyWrite(key) => key,
        }
    }

    /// The operation's kind.
    pub fn kind(&self) -> OpKind {
        match self {
            YcsbOp::Read(_) => OpKind::Read,
            YcsbOp::Update(_) => OpKind::Update,
            YcsbOp::Insert(_) => OpKind::Insert,
            YcsbOp::Scan(..) => OpKind::Scan,
            YcsbOp::ReadModifyWrite(_) => OpKind::ReadModifyWrite,
        }
    }
}

/// YCSB's `DiscreteGenerator` over the workload's non-zero proportions, in
/// `createOperationGenerator`'s order.
#[derive(Debug, Clone)]
struct OperationChooser {
    /// (weight / sum of weights, kind).
    choices: Vec<(f64, OpKind)>,
}

impl OperationChooser {
    fn new(mix: OperationMix) -> Self {
        let weighted = [
            (mix.read, OpKind::Read),
            (mix.update, OpKind::Update),
            (mix.insert, OpKind::Insert),
            (mix.scan, OpKind::Scan),
            (mix.read_modify_write, OpKind::ReadModifyWrite),
        ];
        let sum: f64 = weighted.iter().filter(|(w, _)| *w > 0.0).map(|(w, _)| w).sum();
        let choices = weighted.iter().filter(|(w, _)| *w > 0.0).map(|&(w, kind)| (w / sum, kind)).collect();
        OperationChooser { choices }
    }

    fn choose(&self, rng: &mut Rng) -> OpKind {
        let mut val = rng.next_f64();
        for &(weight, kind) in &self.choices {
            if val < weight {
                return kind;
            }
            val -= weight;
        }
        // Only rounding gets here (YCSB would throw); the last kind is the
        // one whose interval the value fell just past.
        self.choices.last().map_or(OpKind::Read, |&(_, kind)| kind)
    }
}

/// The workload's key chooser (`keychooser`).
#[derive(Debug, Clone)]
enum KeyChooser {
    Zipfian(ScrambledZipfian),
    Latest(SkewedLatest),
}

/// The run phase of a [`YcsbSpec`]: an iterator over its
/// `operation_count` operations.
#[derive(Debug, Clone)]
pub struct YcsbRun {
    remaining: u64,
    operations: OperationChooser,
    keys: KeyChooser,
    scan_length: Uniform,
    /// The keynum the next insert takes; every keynum below it exists.
    next_insert: u64,
    op_rng: Rng,
    key_rng: Rng,
    scan_rng: Rng,
}

impl YcsbRun {
    /// The run phase of `spec`, starting after its load phase.
    ///
    /// For workload D this sums ζ over `record_count - 1` items (one `powf`
    /// per record), as YCSB does when it builds the generator.
    ///
    /// # Errors
    /// [`YcsbError::NoRecords`] if `record_count` is 0,
    /// [`YcsbError::TooManyKeys`] if the keynums would overflow a `u64`.
    pub fn new(spec: &YcsbSpec) -> Result<Self, YcsbError> {
        if spec.record_count == 0 {
            return Err(YcsbError::NoRecords);
        }
        spec.record_count.checked_add(spec.operation_count).ok_or(YcsbError::TooManyKeys)?;

        let workload = spec.workload;
        let mix = workload.mix();
        let last_loaded = spec.record_count - 1;
        let keys = match workload.request_distribution() {
            RequestDistribution::Zipfian => {
                // CoreWorkload sizes the keyspace for the inserts to come
                // ("2 is fudge factor"): ScrambledZipfianGenerator(insertstart,
                // insertstart + insertcount + expectednewkeys).
                let expected_new_keys = (spec.operation_count as f64 * mix.insert * 2.0) as u64;
                let max = spec
                    .record_count
                    .checked_add(expected_new_keys)
                    .filter(|&max| max < u64::MAX)
                    .ok_or(YcsbError::TooManyKeys)?;
                KeyChooser::Zipfian(ScrambledZipfian::new(0, max))
            }
            RequestDistribution::Latest => KeyChooser::Latest(SkewedLatest::new(last_loaded)),
        };

        let mut seeds = spec.seed;
        Ok(YcsbRun {
            remaining: spec.operation_count,
            operations: OperationChooser::new(mix),
            keys,
            scan_length: Uniform::new(1, workload.max_scan_length()),
            next_insert: spec.record_count,
            op_rng: Rng::seed_from_u64(splitmix64(&mut seeds)),
            key_rng: Rng::seed_from_u64(splitmix64(&mut seeds)),
            scan_rng: Rng::seed_from_u64(splitmix64(&mut seeds)),
        })
    }

    /// How many keys exist after the operations emitted so far: the loaded
    /// records plus the inserts.
    pub fn key_count(&self) -> u64 {
        self.next_insert
    }

    /// How many operations are left.
    pub fn remaining(&self) -> u64 {
        self.remaining
    }

    /// `CoreWorkload.nextKeynum`: a keynum from the key chooser, drawn again
    /// while it names a record not inserted yet.
    fn next_keynum(&mut self) -> u64 {
        // `next_insert >= record_count >= 1`.
        let last = self.next_insert - 1;
        loop {
            let keynum = match &mut self.keys {
                KeyChooser::Zipfian(gen) => gen.sample(&mut self.key_rng),
                KeyChooser::Latest(gen) => gen.sample(&mut self.key_rng, last),
            };
            if keynum <= last {
                return keynum;
            }
        }
    }
}

impl Iterator for YcsbRun {
    type Item = YcsbOp;

    fn next(&mut self) -> Option<YcsbOp> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        let op = match self.operations.choose(&mut self.op_rng) {
            OpKind::Read => YcsbOp::Read(key_name(self.next_keynum())),
            OpKind::Update => YcsbOp::Update(key_name(self.next_keynum())),
            OpKind::ReadModifyWrite => YcsbOp::ReadModifyWrite(key_name(self.next_keynum())),
            OpKind::Scan => {
                let start = key_name(self.next_keynum());
                let len = self.scan_length.sample(&mut self.scan_rng);
                YcsbOp::Scan(start, usize::try_from(len).unwrap_or(usize::MAX))
            }
            OpKind::Insert => {
                // Cannot overflow: `new` checked record_count + operation_count.
                let keynum = self.next_insert;
                self.next_insert += 1;
                YcsbOp::Insert(key_name(keynum))
            }
        };
        Some(op)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        size_hint(self.remaining)
    }
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{HashMap, HashSet};

    /// `Utils.fnvhash64` transcribed line by line, on Java `long`s.
    fn java_fnvhash64(mut val: i64) -> i64 {
        let mut hashval: i64 = 0xCBF2_9CE4_8422_2325_u64 as i64;
        for _ in 0..8 {
            let octet: i64 = val & 0x00ff;
            val >>= 8;
            hashval ^= octet;
            hashval = hashval.wrapping_mul(1_099_511_628_211);
        }
        // Math.abs(long)
        if hashval < 0 {
            hashval.wrapping_neg()
        } else {
            hashval
        }
    }

    fn spec(workload: Workload, records: u64, ops: u64, seed: u64) -> YcsbSpec {
        YcsbSpec::new(workload, records, ops, seed)
    }

    #[test]
    fn key_names_are_ycsbs() {
        for keynum in [0u64, 1, 2, 3, 255, 256, 999, 1000, 123_456_789, 1 << 40] {
            let expected = format!("user{}", java_fnvhash64(keynum as i64));
            assert_eq!(key_name(keynum), expected.into_bytes(), "keynum {keynum}");
        }
        // The first keys of every YCSB load with the default insert order.
        assert_eq!(key_name(0), b"user6284781860667377211");
        assert_eq!(key_name(1), b"user8517097267634966620");
        assert_eq!(key_name(2), b"user1820151046732198393");
    }

    #[test]
    fn load_keys_are_keynums_in_order() {
        let s = spec(Workload::A, 1000, 0, 1);
        let keys: Vec<_> = load_keys(&s).collect();
        assert_eq!(keys.len(), 1000);
        assert_eq!(load_keys(&s).size_hint(), (1000, Some(1000)));
        for (keynum, key) in keys.iter().enumerate() {
            assert_eq!(*key, key_name(keynum as u64));
        }
        let distinct: HashSet<_> = keys.iter().collect();
        assert_eq!(distinct.len(), 1000);
    }

    #[test]
    fn same_spec_same_sequence() {
        for workload in Workload::ALL {
            let s = spec(workload, 500, 5000, 42);
            let first: Vec<_> = YcsbRun::new(&s).expect("valid spec").collect();
            let second: Vec<_> = YcsbRun::new(&s).expect("valid spec").collect();
            assert_eq!(first.len(), 5000);
            assert_eq!(first, second, "workload {workload}");
            let other: Vec<_> = YcsbRun::new(&YcsbSpec { seed: 43, ..s }).expect("valid spec").collect();
            assert_ne!(first, other, "workload {workload}: seed ignored");
        }
    }

    #[test]
    fn proportions_match_the_workload_files() {
        let ops = 100_000;
        for workload in Workload::ALL {
            let mut counts: HashMap<OpKind, u64> = HashMap::new();
            for op in YcsbRun::new(&spec(workload, 1000, ops, 7)).expect("valid spec") {
                *counts.entry(op.kind()).or_default() += 1;
            }
            let mix = workload.mix();
            for (kind, expected) in [
                (OpKind::Read, mix.read),
                (OpKind::Update, mix.update),
                (OpKind::Insert, mix.insert),
                (OpKind::Scan, mix.scan),
                (OpKind::ReadModifyWrite, mix.read_modify_write),
            ] {
                let count = counts.get(&kind).copied().unwrap_or(0);
                let share = count as f64 / ops as f64;
                assert!(
                    (share - expected).abs() < 0.01,
                    "workload {workload}: {kind} share {share}, expected {expected}"
                );
                if expected == 0.0 {
                    assert_eq!(count, 0, "workload {workload}: unexpected {kind}");
                }
            }
        }
    }

    /// P(item k) of Gray's algorithm for `n` items: exactly the zipfian
    /// 1/(k+1)^θ/ζ(n) for k = 0 and 1; beyond, the measure of the `u` for
    /// which `n (1 - η (1 - u))^α` truncates to k, an approximation of it.
    fn gray_share(n: u64, theta: f64, k: u64) -> f64 {
        let zetan = zeta(n, theta);
        if k < 2 {
            return 1.0 / ((k + 1) as f64).powf(theta) / zetan;
        }
        let eta = eta(n, theta, zeta(2, theta), zetan);
        let u = |k: u64| 1.0 - (1.0 - (k as f64 / n as f64).powf(1.0 - theta)) / eta;
        u(k + 1) - u(k)
    }

    #[test]
    fn zipfian_head_has_the_theoretical_share() {
        let n = 1000;
        let mut gen = Zipfian::new(n, ZIPFIAN_CONSTANT);
        let mut rng = Rng::seed_from_u64(3);
        let samples = 400_000;
        let mut counts = vec![0u64; n as usize];
        for _ in 0..samples {
            let item = gen.sample(&mut rng);
            assert!(item < n, "item {item} out of range");
            counts[item as usize] += 1;
        }
        // The most popular item has p(1) = 1/ζ(1000, 0.99) ≈ 12.9 %.
        let p1 = 1.0 / zeta(n, ZIPFIAN_CONSTANT);
        assert!((p1 - 0.1294).abs() < 0.0001, "p(1) = {p1}");
        for k in [0u64, 1, 2, 9, 99] {
            let expected = gray_share(n, ZIPFIAN_CONSTANT, k);
            let share = counts[k as usize] as f64 / samples as f64;
            // Five standard deviations of a binomial share.
            let tolerance = 5.0 * (expected * (1.0 - expected) / samples as f64).sqrt();
            assert!((share - expected).abs() < tolerance, "item {k}: share {share}, expected {expected} ± {tolerance}");
        }
        assert!((gray_share(n, ZIPFIAN_CONSTANT, 0) - p1).abs() < 1e-15);
        // Shares fall with rank.
        assert!(counts[0] > counts[1] && counts[1] > counts[2] && counts[2] > counts[9]);
    }

    #[test]
    fn zipfian_extends_zeta_incrementally() {
        let mut gen = Zipfian::new(1000, ZIPFIAN_CONSTANT);
        let mut rng = Rng::seed_from_u64(4);
        for count in [1000u64, 1001, 1500, 1200, 4000] {
            let item = gen.sample_with_count(&mut rng, count);
            assert!(item < count.max(gen.count_for_zeta));
        }
        assert_eq!(gen.count_for_zeta, 4000);
        assert!((gen.zetan - zeta(4000, ZIPFIAN_CONSTANT)).abs() < 1e-9);
    }

    #[test]
    fn zipfian_growth_keeps_the_initial_eta() {
        // YCSB recomputes η from the construction-time item count when the
        // count grows; with m items at construction and n now, the formula
        // branch starts at item ⌊2n/m⌋, so items 2 up to it are never drawn.
        // `SkewedLatest` inherits this (workload D), as in YCSB.
        let (m, n) = (1000u64, 6000u64);
        let mut gen = Zipfian::new(m, ZIPFIAN_CONSTANT);
        let mut rng = Rng::seed_from_u64(16);
        let mut counts = vec![0u64; n as usize + 1];
        for _ in 0..200_000 {
            counts[gen.sample_with_count(&mut rng, n) as usize] += 1;
        }
        assert!(counts[0] > 0 && counts[1] > 0);
        assert!(counts[2..(2 * n / m) as usize].iter().all(|&c| c == 0));
        assert!(counts[(2 * n / m) as usize] > 0);
    }

    #[test]
    fn zipfian_with_range_stays_in_range() {
        let mut gen = Zipfian::with_range(1, 100, ZIPFIAN_CONSTANT);
        let mut rng = Rng::seed_from_u64(5);
        for _ in 0..100_000 {
            assert!((1..=100).contains(&gen.sample(&mut rng)));
        }
        let mut single = Zipfian::new(1, ZIPFIAN_CONSTANT);
        assert_eq!(single.sample(&mut rng), 0);
    }

    #[test]
    fn scrambled_zipfian_zetan_is_for_ten_billion_items() {
        // ζ(10¹⁰, 0.99): the first 10⁶ terms summed, the rest by the
        // midpoint integral of x^-θ, which is accurate to ~1e-9 out there.
        let theta = ZIPFIAN_CONSTANT;
        let head = 1_000_000u64;
        let antiderivative = |x: f64| x.powf(1.0 - theta) / (1.0 - theta);
        let tail = antiderivative(SCRAMBLED_ITEM_COUNT as f64 + 0.5) - antiderivative(head as f64 + 0.5);
        let estimate = zeta(head, theta) + tail;
        assert!((estimate - SCRAMBLED_ZETAN).abs() < 1e-6, "{estimate} vs {SCRAMBLED_ZETAN}");
    }

    #[test]
    fn scrambled_zipfian_stays_in_range() {
        let mut rng = Rng::seed_from_u64(6);
        for (min, max) in [(0u64, 0u64), (0, 9), (10, 109), (0, 999_999), (5, 5)] {
            let mut gen = ScrambledZipfian::new(min, max);
            for _ in 0..20_000 {
                let item = gen.sample(&mut rng);
                assert!((min..=max).contains(&item), "{item} not in {min}..={max}");
            }
        }
    }

    #[test]
    fn workload_a_hot_key_is_where_ycsb_puts_it() {
        // Records 0..1000, no inserts: the scrambled zipfian spans 1001 items
        // and its most popular rank (0) lands on fnvhash64(0) % 1001.
        let records = 1000;
        let ops = 200_000;
        let hot = key_name(fnvhash64(0).unsigned_abs() % (records + 1));
        let mut counts: HashMap<Vec<u8>, u64> = HashMap::new();
        for op in YcsbRun::new(&spec(Workload::A, records, ops, 8)).expect("valid spec") {
            *counts.entry(op.key().to_vec()).or_default() += 1;
        }
        let (hottest, count) = counts.iter().max_by_key(|(_, count)| **count).expect("some operations");
        assert_eq!(*hottest, hot);
        // Rank 0 has 1/ζ ≈ 3.8 % of the draws; the rest of the 10¹⁰ ranks
        // add roughly 1/1001 each to every key.
        let share = *count as f64 / ops as f64;
        assert!((0.035..0.045).contains(&share), "hot key share {share}");
        // Every loaded key names an existing record.
        let loaded: HashSet<_> = load_keys(&spec(Workload::A, records, 0, 0)).collect();
        assert!(counts.keys().all(|key| loaded.contains(key)));
    }

    #[test]
    fn d_and_e_only_name_inserted_keys() {
        for workload in [Workload::D, Workload::E] {
            let s = spec(workload, 200, 50_000, 9);
            let mut existing: HashSet<Vec<u8>> = load_keys(&s).collect();
            let mut run = YcsbRun::new(&s).expect("valid spec");
            let mut next_keynum = s.record_count;
            let mut inserts = 0;
            while let Some(op) = run.next() {
                match op {
                    YcsbOp::Insert(key) => {
                        assert_eq!(key, key_name(next_keynum));
                        next_keynum += 1;
                        inserts += 1;
                        assert!(existing.insert(key), "workload {workload}: key inserted twice");
                    }
                    other => assert!(
                        existing.contains(other.key()),
                        "workload {workload}: {} of a key not inserted yet",
                        other.kind()
                    ),
                }
                assert_eq!(run.key_count(), next_keynum);
            }
            assert!(inserts > 2000, "workload {workload}: {inserts} inserts");
        }
    }

    #[test]
    fn d_reads_favour_the_latest_keys() {
        let s = spec(Workload::D, 1000, 100_000, 10);
        let mut keynums: HashMap<Vec<u8>, u64> = (0..s.record_count).map(|k| (key_name(k), k)).collect();
        let mut last = s.record_count - 1;
        let (mut reads, mut latest, mut recent) = (0u64, 0u64, 0u64);
        for op in YcsbRun::new(&s).expect("valid spec") {
            match op {
                YcsbOp::Insert(key) => {
                    last += 1;
                    keynums.insert(key, last);
                }
                YcsbOp::Read(key) => {
                    let age = last - keynums[&key];
                    reads += 1;
                    latest += u64::from(age == 0);
                    recent += u64::from(age < 10);
                }
                other => panic!("workload D emitted {}", other.kind()),
            }
        }
        // P(age 0) = 1/ζ(n) with n the number of records, 1000 to ~6000.
        let latest_share = latest as f64 / reads as f64;
        let (low, high) = (1.0 / zeta(6100, 0.99), 1.0 / zeta(1000, 0.99));
        assert!(
            (low * 0.95..high * 1.05).contains(&latest_share),
            "latest share {latest_share} not in [{low}, {high}]"
        );
        // A tenth of the keys at most is recent, a fifth of the reads at
        // least (fewer than a plain zipfian's third: see
        // `zipfian_growth_keeps_the_initial_eta`).
        assert!(recent as f64 / reads as f64 > 0.2);
    }

    #[test]
    fn e_scans_are_1_to_100_records() {
        let s = spec(Workload::E, 1000, 100_000, 11);
        let (mut scans, mut total, mut shortest, mut longest) = (0u64, 0u64, usize::MAX, 0);
        for op in YcsbRun::new(&s).expect("valid spec") {
            if let YcsbOp::Scan(_, len) = op {
                assert!((1..=100).contains(&len), "scan length {len}");
                scans += 1;
                total += len as u64;
                shortest = shortest.min(len);
                longest = longest.max(len);
            }
        }
        let mean = total as f64 / scans as f64;
        assert!((mean - 50.5).abs() < 1.0, "mean scan length {mean}");
        assert_eq!((shortest, longest), (1, 100));
    }

    #[test]
    fn values_are_deterministic_printable_and_distinct() {
        let s = spec(Workload::A, 10, 10, 12);
        let v = value(&s, 5);
        assert_eq!(v.len(), YcsbSpec::DEFAULT_VALUE_BYTES);
        assert!(v.iter().all(|b| (b' '..=b'_').contains(b)));
        assert_eq!(v, value(&s, 5));
        assert_ne!(v, value(&s, 6));
        assert_ne!(v, value(&YcsbSpec { seed: 13, ..s }, 5));
        let odd = YcsbSpec { value_bytes: 13, ..s };
        assert_eq!(value(&odd, 5), v[..13]);
        assert!(value(&YcsbSpec { value_bytes: 0, ..s }, 5).is_empty());
        // Every one of the 64 characters turns up.
        let distinct: HashSet<_> = v.iter().collect();
        assert_eq!(distinct.len(), 64);
    }

    #[test]
    fn workload_names_parse_and_print() {
        for (text, workload) in [
            ("a", Workload::A),
            ("B", Workload::B),
            (" c ", Workload::C),
            ("workloadd", Workload::D),
            ("WorkloadE", Workload::E),
            ("f", Workload::F),
        ] {
            assert_eq!(text.parse::<Workload>(), Ok(workload));
        }
        for workload in Workload::ALL {
            assert_eq!(workload.to_string().parse::<Workload>(), Ok(workload));
        }
        for bad in ["", "g", "ab", "workload", "workloadz"] {
            let err = bad.parse::<Workload>().expect_err(bad);
            assert!(err.to_string().contains("unknown YCSB workload"));
        }
    }

    #[test]
    fn empty_or_overflowing_specs_are_refused() {
        assert_eq!(YcsbRun::new(&spec(Workload::A, 0, 10, 0)).err(), Some(YcsbError::NoRecords));
        assert_eq!(YcsbRun::new(&spec(Workload::D, u64::MAX, 10, 0)).err(), Some(YcsbError::TooManyKeys));
        // One record is enough, for every workload.
        for workload in Workload::ALL {
            let ops: Vec<_> = spec(workload, 1, 100, 1).run().expect("valid spec").collect();
            assert_eq!(ops.len(), 100);
        }
    }

    #[test]
    fn uniform_covers_its_bounds() {
        let mut rng = Rng::seed_from_u64(14);
        let gen = Uniform::new(3, 7);
        let seen: HashSet<_> = (0..1000).map(|_| gen.sample(&mut rng)).collect();
        assert_eq!(seen, (3..=7).collect());
        let full = Uniform::new(0, u64::MAX);
        assert_ne!(full.sample(&mut rng), full.sample(&mut rng));
    }

    #[test]
    fn rng_doubles_are_in_unit_interval() {
        let mut rng = Rng::seed_from_u64(15);
        let mut sum = 0.0;
        for _ in 0..100_000 {
            let u = rng.next_f64();
            assert!((0.0..1.0).contains(&u));
            sum += u;
        }
        assert!((sum / 100_000.0 - 0.5).abs() < 0.01);
    }
}
