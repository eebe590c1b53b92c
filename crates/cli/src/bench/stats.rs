//! Small helpers shared by the benchmarks: medians, timing, JSON escaping.

use std::time::Instant;

/// Median of `v` (sorted in place). 0.0 for an empty slice.
pub fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Runs `f(iters)` `rounds` times and returns the median nanoseconds per
/// iteration. `f` must perform `iters` iterations of the measured operation.
pub fn ns_per_iter(rounds: usize, iters: u64, mut f: impl FnMut(u64)) -> f64 {
    f(iters / 10 + 1); // warm caches and branch predictors
    let mut samples = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let t = Instant::now();
        f(iters);
        samples.push(t.elapsed().as_nanos() as f64 / iters as f64);
    }
    median(&mut samples)
}

/// `a / b`, or NaN when `b` is zero.
pub fn ratio(a: f64, b: f64) -> f64 {
    if b == 0.0 { f64::NAN } else { a / b }
}

/// Formats a float for JSON (`null` for NaN or infinity).
pub fn json_num(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.3}")
    } else {
        "null".to_string()
    }
}
