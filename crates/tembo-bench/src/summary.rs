//! Order statistics for timing samples.
//!
//! The benchmark machines are shared and noisy, so every figure Tembo reports
//! is a median (robust to a few disturbed samples), with a high percentile
//! where the tail matters.

/// The median of `samples` (the mean of the two middle values for an even
/// count); 0 for no samples. Sorts `samples`.
pub fn median(samples: &mut [f64]) -> f64 {
    percentile(samples, 50.0)
}

/// The `p`-th percentile (0–100) of `samples` by linear interpolation between
/// closest ranks; 0 for no samples. Sorts `samples`.
pub fn percentile(samples: &mut [f64], p: f64) -> f64 {
    if samples.is_empty() {
        return 0.0;
    }
    samples.sort_by(f64::total_cmp);
    let rank = (p.clamp(0.0, 100.0) / 100.0) * (samples.len() - 1) as f64;
    let lo = rank.floor() as usize;
    let hi = rank.ceil() as usize;
    let frac = rank - lo as f64;
    samples[lo] + (samples[hi] - samples[lo]) * frac
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_percentiles() {
        assert_eq!(median(&mut []), 0.0);
        assert_eq!(median(&mut [3.0]), 3.0);
        assert_eq!(median(&mut [4.0, 1.0, 3.0]), 3.0);
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), 2.5);
        let mut v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert!((percentile(&mut v, 99.0) - 99.01).abs() < 1e-9);
        assert_eq!(percentile(&mut v, 0.0), 1.0);
        assert_eq!(percentile(&mut v, 100.0), 100.0);
    }
}
