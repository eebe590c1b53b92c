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

/// The median of several rounds and the fastest and slowest of them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spread {
    pub min: f64,
    pub median: f64,
    pub max: f64,
}

impl Spread {
    /// No figure: NaN throughout (a row a side does not measure).
    pub const NONE: Spread = Spread {
        min: f64::NAN,
        median: f64::NAN,
        max: f64::NAN,
    };

    /// Of the rounds `v` (sorted in place); NaN throughout for none.
    pub fn of(v: &mut [f64]) -> Spread {
        if v.is_empty() {
            return Spread::NONE;
        }
        let median = median(v);
        Spread {
            min: v[0],
            median,
            max: v[v.len() - 1],
        }
    }

    /// Each figure times `k` (a change of unit).
    pub fn scaled(self, k: f64) -> Spread {
        Spread {
            min: self.min * k,
            median: self.median * k,
            max: self.max * k,
        }
    }

    /// `min-max` with `prec` decimals, for a table's spread column.
    pub fn range(&self, prec: usize) -> String {
        format!("{:.prec$}-{:.prec$}", self.min, self.max)
    }

    /// `median (min-max)` with `prec` decimals: a table's cell.
    pub fn cell(&self, prec: usize) -> String {
        format!("{:.prec$} ({})", self.median, self.range(prec))
    }

    /// `"NAME":median,"NAME_min":min,"NAME_max":max`: the JSON fields of
    /// a figure whose median had the field `NAME` alone before.
    pub fn json_fields(&self, name: &str) -> String {
        format!(
            "\"{name}\":{},\"{name}_min\":{},\"{name}_max\":{}",
            json_num(self.median),
            json_num(self.min),
            json_num(self.max)
        )
    }
}

/// Runs `f(iters)` `rounds` times and returns the nanoseconds per
/// iteration: the median round and the fastest and slowest. `f` must
/// perform `iters` iterations of the measured operation.
pub fn ns_per_iter(rounds: usize, iters: u64, mut f: impl FnMut(u64)) -> Spread {
    f(iters / 10 + 1); // warm caches and branch predictors
    let mut samples = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let t = Instant::now();
        f(iters);
        samples.push(t.elapsed().as_nanos() as f64 / iters as f64);
    }
    Spread::of(&mut samples)
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

/// Formats a string as a JSON string literal.
pub fn json_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The cpu's model name, as /proc/cpuinfo's first `model name` line says
/// it ("unknown" if it says none).
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .filter_map(|l| l.split_once(':'))
                .find(|(k, _)| k.trim() == "model name")
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".to_string())
}

/// A goal line: `goal: TEXT: VALUEx MET|NOT MET`.
pub struct Goal {
    pub text: String,
    pub value: f64,
    pub met: bool,
}

pub fn goal(text: &str, value: f64, met: bool) -> Goal {
    Goal {
        text: text.to_string(),
        value,
        met,
    }
}

pub fn verdict(met: bool) -> &'static str {
    if met { "MET" } else { "NOT MET" }
}

impl Goal {
    /// The goal as its table line.
    pub fn line(&self) -> String {
        format!(
            "goal: {}: {:.2}x {}",
            self.text,
            self.value,
            verdict(self.met)
        )
    }

    /// The goal as a JSON object.
    pub fn json(&self) -> String {
        format!(
            "{{\"goal\":{},\"value\":{},\"met\":{}}}",
            json_str(&self.text),
            json_num(self.value),
            self.met
        )
    }
}

/// `IPCNS_BENCH_QUICK=1`: run a thousandth of the iterations (smoke tests).
pub fn quick() -> bool {
    std::env::var_os("IPCNS_BENCH_QUICK").is_some_and(|v| v == "1")
}

/// A warning for standard error when the machine is busy: the 1-minute
/// load average (`/proc/loadavg`) at least half the usable cpus, so the
/// figures will be slower and more spread than on a quiet machine.
pub fn busy_warning() -> Option<String> {
    let load: f64 = std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    busy(load, cpus).then(|| {
        format!(
            "warning: the load average is {load:.2} on {cpus} usable cpus: other work is running, \
             so the figures will be slower and more spread than on a quiet machine"
        )
    })
}

/// Prints [`busy_warning`]'s warning on standard error, if any.
pub fn warn_if_busy() {
    if let Some(w) = busy_warning() {
        eprintln!("{w}");
    }
}

/// Whether a load average of `load` on `cpus` cpus is a busy machine.
fn busy(load: f64, cpus: usize) -> bool {
    load >= cpus as f64 * 0.5
}

/// The header's second line: `cpu: MODEL, N cpus usable`.
pub fn cpu_line(cpu: &str, usable: usize) -> String {
    match usable {
        1 => format!("cpu: {cpu}, 1 cpu usable"),
        n => format!("cpu: {cpu}, {n} cpus usable"),
    }
}

#[cfg(test)]
mod tests {
    use super::{Spread, busy};

    #[test]
    fn a_spread_is_the_median_between_the_extremes() {
        let s = Spread::of(&mut [5.0, 1.0, 3.0, 9.0]);
        assert_eq!((s.min, s.median, s.max), (1.0, 4.0, 9.0));
        assert_eq!(s.range(1), "1.0-9.0");
        assert_eq!(s.cell(0), "4 (1-9)");
        assert_eq!(
            s.scaled(0.5).json_fields("ns"),
            "\"ns\":2.000,\"ns_min\":0.500,\"ns_max\":4.500"
        );
        let none = Spread::of(&mut []);
        assert!(none.median.is_nan());
        assert_eq!(
            none.json_fields("x"),
            "\"x\":null,\"x_min\":null,\"x_max\":null"
        );
    }

    #[test]
    fn half_the_cpus_loaded_is_busy() {
        assert!(!busy(0.4, 1));
        assert!(busy(0.5, 1));
        assert!(!busy(0.9, 2));
        assert!(busy(1.0, 2));
        assert!(busy(3.7, 4));
    }
}
