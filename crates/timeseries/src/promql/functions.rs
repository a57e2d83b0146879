//! The range functions of the subset, as Prometheus 2.x computes them over the samples of a
//! window `[t - range, t]` (both ends included): `rate`, `increase` (extrapolated to the window's
//! edges, counter resets added back), `irate` (the last two samples) and the `*_over_time`
//! aggregations.

/// The range functions the subset has.
pub const RANGE_FUNCTIONS: &[&str] = &[
    "rate",
    "irate",
    "increase",
    "sum_over_time",
    "avg_over_time",
    "min_over_time",
    "max_over_time",
    "count_over_time",
    "last_over_time",
];

/// Whether the function keeps the metric name (only `last_over_time`, as in Prometheus).
pub fn keeps_name(func: &str) -> bool {
    func == "last_over_time"
}

/// `func` over `points` (time-ordered, ms) of the window `[start, end]` of `range` ms; None: no
/// result at this step.
pub fn apply(func: &str, points: &[(i64, f64)], start: i64, end: i64, range: i64) -> Option<f64> {
    let values = || points.iter().map(|p| p.1);
    match func {
        "rate" => extrapolated(points, start, end, range, true),
        "increase" => extrapolated(points, start, end, range, false),
        "irate" => instant_rate(points),
        _ if points.is_empty() => None,
        "sum_over_time" => Some(values().sum()),
        "avg_over_time" => Some(values().sum::<f64>() / points.len() as f64),
        "count_over_time" => Some(points.len() as f64),
        "min_over_time" => Some(values().fold(f64::NAN, |m, v| if v < m || m.is_nan() { v } else { m })),
        "max_over_time" => Some(values().fold(f64::NAN, |m, v| if v > m || m.is_nan() { v } else { m })),
        "last_over_time" => points.last().map(|p| p.1),
        _ => None,
    }
}

/// Prometheus' `extrapolatedRate` for counters: the increase between the first and last
/// samples, counter resets added back, extrapolated towards the window's edges (to where the
/// counter would have been zero at most, and by at most half a sample interval past the
/// samples when they stop well short of an edge), per second for `rate`.
fn extrapolated(points: &[(i64, f64)], start: i64, end: i64, range: i64, per_second: bool) -> Option<f64> {
    if points.len() < 2 {
        return None;
    }
    let (first, last) = (points[0], points[points.len() - 1]);
    let mut result = last.1 - first.1;
    let mut previous = 0.0;
    for &(_, v) in points {
        if v < previous {
            result += previous;
        }
        previous = v;
    }
    extrapolate(result, points, start, end, range, per_second)
}

/// The increase `result` over `points` (at least two; counter resets added back) extrapolated
/// to the window's edges, per second for `rate`.
pub fn extrapolate(
    mut result: f64,
    points: &[(i64, f64)],
    start: i64,
    end: i64,
    range: i64,
    per_second: bool,
) -> Option<f64> {
    let (first, last) = (points[0], points[points.len() - 1]);
    let mut to_start = (first.0 - start) as f64 / 1000.0;
    let to_end = (end - last.0) as f64 / 1000.0;
    let sampled = (last.0 - first.0) as f64 / 1000.0;
    let average = sampled / (points.len() - 1) as f64;
    if result > 0.0 && first.1 >= 0.0 {
        let to_zero = sampled * (first.1 / result);
        if to_zero < to_start {
            to_start = to_zero;
        }
    }
    let threshold = average * 1.1;
    let mut interval = sampled;
    interval += if to_start < threshold { to_start } else { average / 2.0 };
    interval += if to_end < threshold { to_end } else { average / 2.0 };
    result *= interval / sampled;
    if per_second {
        result /= range as f64 / 1000.0;
    }
    Some(result)
}

/// Prometheus' `instantValue` for `irate`: the per-second rate between the last two samples
/// (the last value alone after a counter reset).
fn instant_rate(points: &[(i64, f64)]) -> Option<f64> {
    let [.., previous, last] = points else { return None };
    let delta = if last.1 < previous.1 { last.1 } else { last.1 - previous.1 };
    let interval = last.0 - previous.0;
    if interval == 0 {
        return None;
    }
    Some(delta / (interval as f64 / 1000.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_extrapolate_and_survive_counter_resets() {
        // a counter every 15 s, 0..=4 increments of 10, window [0, 60 s] exactly covering it
        let points: Vec<(i64, f64)> = (0..=4).map(|i| (i * 15_000, i as f64 * 10.0)).collect();
        assert_eq!(apply("increase", &points, 0, 60_000, 60_000), Some(40.0));
        assert_eq!(apply("rate", &points, 0, 60_000, 60_000), Some(40.0 / 60.0));
        // samples 5 s in from both edges: extrapolated by 5 s each side (below 1.1 intervals);
        // the start only down to where the counter was zero
        let shifted: Vec<(i64, f64)> = points.iter().map(|(t, v)| (t + 5_000, v + 100.0)).collect();
        let inc = apply("increase", &shifted, 0, 70_000, 70_000).unwrap();
        assert!((inc - 40.0 * 70.0 / 60.0).abs() < 1e-9, "{inc}");
        // a reset: 30, 40, 5, 15 → 10 + 5 + 10 = 25 over 45 s, extrapolated to the window
        let reset = [(0, 30.0), (15_000, 40.0), (30_000, 5.0), (45_000, 15.0)];
        let inc = apply("increase", &reset, 0, 45_000, 45_000).unwrap();
        assert!((inc - 25.0).abs() < 1e-9, "{inc}");
        assert_eq!(apply("irate", &reset, 0, 45_000, 45_000), Some(10.0 / 15.0));
        assert_eq!(apply("irate", &reset[..3], 0, 45_000, 45_000), Some(5.0 / 15.0));
        assert_eq!(apply("rate", &reset[..1], 0, 45_000, 45_000), None);
    }

    #[test]
    fn over_time_aggregations() {
        let points = [(0, 3.0), (1, f64::NAN), (2, 1.0), (3, 2.0)];
        assert!(apply("sum_over_time", &points, 0, 3, 3).unwrap().is_nan());
        let points = [(0, 3.0), (2, 1.0), (3, 2.0)];
        assert_eq!(apply("sum_over_time", &points, 0, 3, 3), Some(6.0));
        assert_eq!(apply("avg_over_time", &points, 0, 3, 3), Some(2.0));
        assert_eq!(apply("min_over_time", &points, 0, 3, 3), Some(1.0));
        assert_eq!(apply("max_over_time", &points, 0, 3, 3), Some(3.0));
        assert_eq!(apply("count_over_time", &points, 0, 3, 3), Some(3.0));
        assert_eq!(apply("last_over_time", &points, 0, 3, 3), Some(2.0));
        assert_eq!(apply("max_over_time", &[], 0, 3, 3), None);
    }
}
