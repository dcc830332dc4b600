//! Redis 7.0's geohash arithmetic, for the GEO commands.
//!
//! A GEO key is a sorted set whose scores are 52-bit interleaved geohashes;
//! clients read those scores with ZSCORE/ZRANGE and compare coordinates and
//! distances with what Redis answers, so every number here must come out
//! of the same floating-point steps as Redis's `geohash.c` and
//! `geohash_helper.c`: latitude limited to ±85.05112878 (Web Mercator),
//! cell centres as coordinates, the haversine distance on a sphere of
//! radius 6372797.560856 m, and a search that reads the centre cell and its
//! eight neighbours at a precision estimated from the radius — the same
//! cells, so that a COUNT ANY search stops at the same members.

/// Latitude limits of the index (Web Mercator).
pub const LAT_MIN: f64 = -85.051_128_78;
/// See [`LAT_MIN`].
pub const LAT_MAX: f64 = 85.051_128_78;
/// Longitude limits.
pub const LON_MIN: f64 = -180.0;
/// See [`LON_MIN`].
pub const LON_MAX: f64 = 180.0;
/// Bits per coordinate of a stored score (26 × 2 = 52).
pub const STEP_MAX: u8 = 26;

const D_R: f64 = std::f64::consts::PI / 180.0;
const EARTH_RADIUS: f64 = 6_372_797.560_856;
const MERCATOR_MAX: f64 = 20_037_726.37;

fn deg_rad(a: f64) -> f64 {
    a * D_R
}

fn rad_deg(a: f64) -> f64 {
    a / D_R
}

/// A geohash of `step` bits per coordinate (latitude bits at even
/// positions, longitude bits at odd ones).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Hash {
    /// The interleaved bits.
    pub bits: u64,
    /// Bits per coordinate.
    pub step: u8,
}

impl Hash {
    fn is_zero(self) -> bool {
        self.bits == 0 && self.step == 0
    }

    /// The hash shifted to 52 bits: the lowest score of its cell.
    pub fn align52(self) -> u64 {
        self.bits << (52 - self.step as u32 * 2)
    }
}

/// A cell: its longitude and latitude intervals.
#[derive(Clone, Copy, Debug, Default)]
pub struct Area {
    lon_min: f64,
    lon_max: f64,
    lat_min: f64,
    lat_max: f64,
}

fn spread(v: u32) -> u64 {
    let mut x = v as u64;
    x = (x | (x << 16)) & 0x0000_FFFF_0000_FFFF;
    x = (x | (x << 8)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x << 4)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x << 2)) & 0x3333_3333_3333_3333;
    (x | (x << 1)) & 0x5555_5555_5555_5555
}

fn squash(v: u64) -> u64 {
    let mut x = v & 0x5555_5555_5555_5555;
    x = (x | (x >> 1)) & 0x3333_3333_3333_3333;
    x = (x | (x >> 2)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x >> 4)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x >> 8)) & 0x0000_FFFF_0000_FFFF;
    (x | (x >> 16)) & 0x0000_0000_FFFF_FFFF
}

/// Encodes within the given ranges ((min, max) longitude, then latitude);
/// `None` outside the index's limits or the ranges.
pub fn encode_in(lon_r: (f64, f64), lat_r: (f64, f64), lon: f64, lat: f64, step: u8) -> Option<Hash> {
    if step == 0 || step > 32 || !(LON_MIN..=LON_MAX).contains(&lon) || !(LAT_MIN..=LAT_MAX).contains(&lat) {
        return None;
    }
    if lat < lat_r.0 || lat > lat_r.1 || lon < lon_r.0 || lon > lon_r.1 {
        return None;
    }
    let scale = (1u64 << step) as f64;
    let lat_off = (lat - lat_r.0) / (lat_r.1 - lat_r.0) * scale;
    let lon_off = (lon - lon_r.0) / (lon_r.1 - lon_r.0) * scale;
    Some(Hash { bits: spread(lat_off as u32) | (spread(lon_off as u32) << 1), step })
}

/// Encodes a point in the index's ranges.
pub fn encode(lon: f64, lat: f64, step: u8) -> Option<Hash> {
    encode_in((LON_MIN, LON_MAX), (LAT_MIN, LAT_MAX), lon, lat, step)
}

/// The cell of `h`.
pub fn decode(h: Hash) -> Option<Area> {
    if h.is_zero() {
        return None;
    }
    let lat_i = squash(h.bits) as u32;
    let lon_i = squash(h.bits >> 1) as u32;
    let div = (1u64 << h.step) as f64;
    let (lat_s, lon_s) = (LAT_MAX - LAT_MIN, LON_MAX - LON_MIN);
    Some(Area {
        lat_min: LAT_MIN + (lat_i as f64 / div) * lat_s,
        lat_max: LAT_MIN + (lat_i.wrapping_add(1) as f64 / div) * lat_s,
        lon_min: LON_MIN + (lon_i as f64 / div) * lon_s,
        lon_max: LON_MIN + (lon_i.wrapping_add(1) as f64 / div) * lon_s,
    })
}

/// C's `(long long)d` as x86-64 computes it: truncation, and the
/// "integer indefinite" i64::MIN for NaN and values out of range (a ZADD
/// may give a geo key any score).
pub fn c_i64(d: f64) -> i64 {
    const TWO63: f64 = 9_223_372_036_854_775_808.0;
    if d > -TWO63 && d < TWO63 {
        d as i64
    } else {
        i64::MIN
    }
}

/// C's `(uint64_t)d` as gcc compiles it for x86-64 (two truncating
/// conversions around 2^63), for the same reason as [`c_i64`].
pub fn c_u64(d: f64) -> u64 {
    const TWO63: f64 = 9_223_372_036_854_775_808.0;
    if d < TWO63 || d.is_nan() {
        c_i64(d) as u64
    } else {
        (c_i64(d - TWO63) as u64) ^ (1 << 63)
    }
}

/// The (longitude, latitude) a stored score stands for: its cell's centre.
pub fn score_to_lonlat(score: f64) -> Option<(f64, f64)> {
    let a = decode(Hash { bits: c_u64(score), step: STEP_MAX })?;
    let lon = ((a.lon_min + a.lon_max) / 2.0).clamp(LON_MIN, LON_MAX);
    let lat = ((a.lat_min + a.lat_max) / 2.0).clamp(LAT_MIN, LAT_MAX);
    Some((lon, lat))
}

/// The score GEOADD stores for a point (already checked to be in range).
pub fn lonlat_to_score(lon: f64, lat: f64) -> u64 {
    encode(lon, lat, STEP_MAX).map_or(0, Hash::align52)
}

/// The standard 11-character geohash (latitude range ±90) GEOHASH answers.
pub fn to_standard(score: f64) -> Option<String> {
    const ALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    let (lon, lat) = score_to_lonlat(score)?;
    let bits = encode_in((-180.0, 180.0), (-90.0, 90.0), lon, lat, 26).map_or(0, |h| h.bits);
    Some(
        (0..11)
            .map(|i| if i == 10 { '0' } else { ALPHABET[((bits >> (52 - (i + 1) * 5)) & 0x1f) as usize] as char })
            .collect(),
    )
}

fn move_x(h: &mut Hash, d: i8) {
    if d == 0 {
        return;
    }
    let mut x = h.bits & 0xaaaa_aaaa_aaaa_aaaa;
    let y = h.bits & 0x5555_5555_5555_5555;
    let zz = 0x5555_5555_5555_5555u64 >> (64 - h.step as u32 * 2);
    if d > 0 {
        x = x.wrapping_add(zz + 1);
    } else {
        x = (x | zz).wrapping_sub(zz + 1);
    }
    x &= 0xaaaa_aaaa_aaaa_aaaau64 >> (64 - h.step as u32 * 2);
    h.bits = x | y;
}

fn move_y(h: &mut Hash, d: i8) {
    if d == 0 {
        return;
    }
    let x = h.bits & 0xaaaa_aaaa_aaaa_aaaa;
    let mut y = h.bits & 0x5555_5555_5555_5555;
    let zz = 0xaaaa_aaaa_aaaa_aaaau64 >> (64 - h.step as u32 * 2);
    if d > 0 {
        y = y.wrapping_add(zz + 1);
    } else {
        y = (y | zz).wrapping_sub(zz + 1);
    }
    y &= 0x5555_5555_5555_5555u64 >> (64 - h.step as u32 * 2);
    h.bits = x | y;
}

fn neighbour(h: Hash, dx: i8, dy: i8) -> Hash {
    let mut n = h;
    move_x(&mut n, dx);
    move_y(&mut n, dy);
    n
}

/// What a search covers.
#[derive(Clone, Copy, Debug)]
pub enum Shape {
    /// Within `radius` (in the unit) of the centre.
    Circle {
        /// Radius in the unit.
        radius: f64,
    },
    /// Within a `width` × `height` box (in the unit) centred on the centre.
    Box {
        /// Width in the unit.
        width: f64,
        /// Height in the unit.
        height: f64,
    },
}

/// A search: its centre, shape, and the metres per unit.
#[derive(Clone, Copy, Debug)]
pub struct Search {
    /// Longitude of the centre.
    pub lon: f64,
    /// Latitude of the centre.
    pub lat: f64,
    /// The shape.
    pub shape: Shape,
    /// Metres per unit (M 1, KM 1000, FT 0.3048, MI 1609.34).
    pub conversion: f64,
}

fn estimate_steps(mut range: f64, lat: f64) -> u8 {
    if range == 0.0 {
        return 26;
    }
    let mut step: i32 = 1;
    while range < MERCATOR_MAX {
        range *= 2.0;
        step += 1;
    }
    step -= 2;
    if !(-66.0..=66.0).contains(&lat) {
        step -= 1;
        if !(-80.0..=80.0).contains(&lat) {
            step -= 1;
        }
    }
    step.clamp(1, 26) as u8
}

impl Search {
    /// The bounding box [min lon, min lat, max lon, max lat].
    fn bounds(&self) -> [f64; 4] {
        let (h, w) = match self.shape {
            Shape::Circle { radius } => (radius, radius),
            Shape::Box { width, height } => (height / 2.0, width / 2.0),
        };
        let (height, width) = (self.conversion * h, self.conversion * w);
        let lat_delta = rad_deg(height / EARTH_RADIUS);
        let top = rad_deg(width / EARTH_RADIUS / deg_rad(self.lat + lat_delta).cos());
        let bottom = rad_deg(width / EARTH_RADIUS / deg_rad(self.lat - lat_delta).cos());
        let d = if self.lat < 0.0 { bottom } else { top };
        [self.lon - d, self.lat - lat_delta, self.lon + d, self.lat + lat_delta]
    }

    /// The nine cells to read (centre, N, S, E, W, NE, NW, SE, SW); cells
    /// that cannot hold a match are zero.
    pub fn cells(&self) -> [Hash; 9] {
        let [min_lon, min_lat, max_lon, max_lat] = self.bounds();
        let radius = match self.shape {
            Shape::Circle { radius } => radius,
            Shape::Box { width, height } => ((width / 2.0) * (width / 2.0) + (height / 2.0) * (height / 2.0)).sqrt(),
        } * self.conversion;
        let mut steps = estimate_steps(radius, self.lat);
        let at = |steps: u8| {
            let h = encode(self.lon, self.lat, steps).unwrap_or_default();
            let n = [
                neighbour(h, 0, 1),
                neighbour(h, 0, -1),
                neighbour(h, 1, 0),
                neighbour(h, -1, 0),
                neighbour(h, 1, 1),
                neighbour(h, -1, 1),
                neighbour(h, 1, -1),
                neighbour(h, -1, -1),
            ];
            (h, n)
        };
        let (mut h, mut n) = at(steps);
        let area_of = |h: Hash| decode(h).unwrap_or_default();
        let too_big = area_of(n[0]).lat_max < max_lat
            || area_of(n[1]).lat_min > min_lat
            || area_of(n[2]).lon_max < max_lon
            || area_of(n[3]).lon_min > min_lon;
        if steps > 1 && too_big {
            steps -= 1;
            (h, n) = at(steps);
        }
        let area = area_of(h);
        if steps >= 2 {
            let zero = Hash::default();
            // Indices: 0 N, 1 S, 2 E, 3 W, 4 NE, 5 NW, 6 SE, 7 SW.
            if area.lat_min < min_lat {
                (n[1], n[7], n[6]) = (zero, zero, zero);
            }
            if area.lat_max > max_lat {
                (n[0], n[4], n[5]) = (zero, zero, zero);
            }
            if area.lon_min < min_lon {
                (n[3], n[7], n[5]) = (zero, zero, zero);
            }
            if area.lon_max > max_lon {
                (n[2], n[6], n[4]) = (zero, zero, zero);
            }
        }
        [h, n[0], n[1], n[2], n[3], n[4], n[5], n[6], n[7]]
    }

    /// The distance in metres from the centre to (lon, lat) if that point
    /// is inside the shape.
    pub fn contains(&self, lon: f64, lat: f64) -> Option<f64> {
        match self.shape {
            Shape::Circle { radius } => {
                let d = distance(self.lon, self.lat, lon, lat);
                (d <= radius * self.conversion).then_some(d)
            }
            Shape::Box { width, height } => {
                let (w, h) = (width * self.conversion, height * self.conversion);
                if lat_distance(lat, self.lat) > h / 2.0 {
                    return None;
                }
                if distance(lon, lat, self.lon, lat) > w / 2.0 {
                    return None;
                }
                Some(distance(self.lon, self.lat, lon, lat))
            }
        }
    }
}

/// The score range [min, max) of the members in cell `h`.
pub fn cell_scores(h: Hash) -> (u64, u64) {
    (h.align52(), Hash { bits: h.bits + 1, step: h.step }.align52())
}

fn lat_distance(lat1: f64, lat2: f64) -> f64 {
    EARTH_RADIUS * (deg_rad(lat2) - deg_rad(lat1)).abs()
}

/// The haversine distance in metres.
pub fn distance(lon1: f64, lat1: f64, lon2: f64, lat2: f64) -> f64 {
    let (lon1r, lon2r) = (deg_rad(lon1), deg_rad(lon2));
    let v = ((lon2r - lon1r) / 2.0).sin();
    if v == 0.0 {
        return lat_distance(lat1, lat2);
    }
    let (lat1r, lat2r) = (deg_rad(lat1), deg_rad(lat2));
    let u = ((lat2r - lat1r) / 2.0).sin();
    let a = u * u + lat1r.cos() * lat2r.cos() * v * v;
    2.0 * EARTH_RADIUS * a.sqrt().asin()
}

/// Redis's `pqsort` (BSD quicksort that only recurses into the parts that
/// overlap positions `lo..=hi`), reproduced step for step: with COUNT, the
/// places at equal distances come out in the order it leaves them.
pub fn pqsort<T>(v: &mut [T], cmp: &impl Fn(&T, &T) -> i32, lo: usize, hi: usize) {
    pq(v, 0, v.len(), cmp, lo, hi);
}

fn med3<T>(v: &[T], a: usize, b: usize, c: usize, cmp: &impl Fn(&T, &T) -> i32) -> usize {
    if cmp(&v[a], &v[b]) < 0 {
        if cmp(&v[b], &v[c]) < 0 {
            b
        } else if cmp(&v[a], &v[c]) < 0 {
            c
        } else {
            a
        }
    } else if cmp(&v[b], &v[c]) > 0 {
        b
    } else if cmp(&v[a], &v[c]) < 0 {
        a
    } else {
        c
    }
}

fn vecswap<T>(v: &mut [T], a: usize, b: usize, n: usize) {
    for i in 0..n {
        v.swap(a + i, b + i);
    }
}

fn pq<T>(v: &mut [T], mut a: usize, mut n: usize, cmp: &impl Fn(&T, &T) -> i32, lo: usize, hi: usize) {
    let overlaps = |start: usize, len: usize| !((lo < start && hi < start) || (lo >= start + len && hi >= start + len));
    loop {
        if n < 7 {
            for m in a + 1..a + n {
                let mut l = m;
                while l > a && cmp(&v[l - 1], &v[l]) > 0 {
                    v.swap(l, l - 1);
                    l -= 1;
                }
            }
            return;
        }
        let mut pm = a + n / 2;
        if n > 7 {
            let (mut pl, mut pn) = (a, a + n - 1);
            if n > 40 {
                let d = n / 8;
                pl = med3(v, pl, pl + d, pl + 2 * d, cmp);
                pm = med3(v, pm - d, pm, pm + d, cmp);
                pn = med3(v, pn - 2 * d, pn - d, pn, cmp);
            }
            pm = med3(v, pl, pm, pn, cmp);
        }
        v.swap(a, pm);
        let (mut pa, mut pb) = (a + 1, a + 1);
        let (mut pc, mut pd) = (a + n - 1, a + n - 1);
        loop {
            while pb <= pc {
                let c = cmp(&v[pb], &v[a]);
                if c > 0 {
                    break;
                }
                if c == 0 {
                    v.swap(pa, pb);
                    pa += 1;
                }
                pb += 1;
            }
            while pb <= pc {
                let c = cmp(&v[pc], &v[a]);
                if c < 0 {
                    break;
                }
                if c == 0 {
                    v.swap(pc, pd);
                    pd -= 1;
                }
                pc -= 1;
            }
            if pb > pc {
                break;
            }
            v.swap(pb, pc);
            pb += 1;
            pc -= 1;
        }
        let pn = a + n;
        let r = (pa - a).min(pb - pa);
        vecswap(v, a, pb - r, r);
        let r = (pd - pc).min(pn - pd - 1);
        vecswap(v, pb, pn - r, r);
        let r = pb - pa;
        if r > 1 && overlaps(a, r) {
            pq(v, a, r, cmp, lo, hi);
        }
        let r = pd - pc;
        if r <= 1 {
            return;
        }
        a = pn - r;
        n = r;
        if !overlaps(a, n) {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn palermo_matches_redis() {
        let s = lonlat_to_score(13.361389, 38.115556);
        assert_eq!(s, 3479099956230698);
        let (lon, lat) = score_to_lonlat(s as f64).unwrap();
        assert_eq!(format!("{lon:.17}"), "13.36138933897018433");
        assert_eq!(format!("{lat:.17}"), "38.11555639549629859");
        assert_eq!(to_standard(s as f64).unwrap(), "sqc8b49rny0");
        let c = lonlat_to_score(15.087269, 37.502669);
        let (lon2, lat2) = score_to_lonlat(c as f64).unwrap();
        assert_eq!(format!("{:.4}", distance(lon, lat, lon2, lat2) / 1000.0), "166.2742");
    }

    #[test]
    fn interleave_round_trips() {
        for v in [0u32, 1, 0xdead_beef, u32::MAX] {
            assert_eq!(squash(spread(v)), v as u64);
        }
    }
}
