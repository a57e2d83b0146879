//! The range functions over a window that slides along a series' sorted points, step after
//! step: each point enters the window once and leaves it once, so a function costs O(points +
//! steps) per series instead of steps × window points (`rate(x[7d])` at 11 000 steps over a
//! series of 500 000 points read the window anew at every step).
//!
//! What each function keeps: `count`, `last` and `irate` only the window's ends; `rate` and
//! `increase` the counter resets (those inside the window are added back, in order, as
//! Prometheus adds them); `min`/`max` a monotonic queue; `sum`/`avg` a compensated running sum
//! (Neumaier's), with NaN and infinities counted apart. A window of a few points is computed
//! whole, exactly as [`functions::apply`] does. The work beyond the sliding pass (resets
//! walked, a sum recomputed after an overflow) is reported to the caller, which counts it
//! against the samples budget.

use super::functions;
use std::collections::VecDeque;

/// Windows of at most this many points are computed whole.
const SMALL: usize = 64;

/// A range function over one series, evaluated at ascending windows.
pub struct Sliding<'p> {
    func: &'p str,
    points: &'p [(i64, f64)],
    lo: usize,
    hi: usize,
    /// `rate`/`increase`: the indices `i` where `points[i] < points[i - 1]`
    resets: Vec<usize>,
    /// `sum`/`avg`: the window's running sum
    sum: RunningSum,
    /// `min`/`max`: indices of the window's candidates, their values monotonic
    queue: VecDeque<usize>,
}

impl<'p> Sliding<'p> {
    pub fn new(func: &'p str, points: &'p [(i64, f64)]) -> Sliding<'p> {
        let resets = if matches!(func, "rate" | "increase") {
            (1..points.len()).filter(|&i| points[i].1 < points[i - 1].1).collect()
        } else {
            Vec::new()
        };
        Sliding { func, points, lo: 0, hi: 0, resets, sum: RunningSum::default(), queue: VecDeque::new() }
    }

    /// The function over the window `[start, end]` (both ascending from one call to the next)
    /// of `range` ms, and the samples gone over besides the sliding pass.
    pub fn at(&mut self, start: i64, end: i64, range: i64) -> (Option<f64>, usize) {
        let points = self.points;
        while self.lo < points.len() && points[self.lo].0 < start {
            if self.lo < self.hi {
                self.leave(self.lo);
            }
            self.lo += 1;
        }
        if self.hi < self.lo {
            self.hi = self.lo;
            self.sum = RunningSum::default();
            self.queue.clear();
        }
        while self.hi < points.len() && points[self.hi].0 <= end {
            self.enter(self.hi);
            self.hi += 1;
        }
        let window = &points[self.lo..self.hi];
        if window.len() <= SMALL {
            return (functions::apply(self.func, window, start, end, range), 0);
        }
        match self.func {
            "rate" | "increase" => self.extrapolated(start, end, range),
            "sum_over_time" | "avg_over_time" => {
                let (sum, touched) = match self.sum.value() {
                    Some(sum) => (sum, 0),
                    None => {
                        // an overflow: the window summed anew, in order, as Prometheus does
                        (window.iter().map(|p| p.1).sum::<f64>(), window.len())
                    }
                };
                let value = if self.func == "sum_over_time" { sum } else { sum / window.len() as f64 };
                (Some(value), touched)
            }
            "min_over_time" | "max_over_time" => {
                // only NaN values in the window: Prometheus' fold answers NaN
                (Some(self.queue.front().map_or(f64::NAN, |&i| points[i].1)), 0)
            }
            // count, last, irate: the window's length and its last points
            _ => (functions::apply(self.func, window, start, end, range), 0),
        }
    }

    fn enter(&mut self, i: usize) {
        let v = self.points[i].1;
        match self.func {
            "sum_over_time" | "avg_over_time" => self.sum.add(v),
            "min_over_time" | "max_over_time" if !v.is_nan() => {
                let min = self.func == "min_over_time";
                // ties keep the earlier candidate: the fold keeps the first of equal values
                while let Some(&back) = self.queue.back() {
                    let b = self.points[back].1;
                    if (min && v < b) || (!min && v > b) {
                        self.queue.pop_back();
                    } else {
                        break;
                    }
                }
                self.queue.push_back(i);
            }
            _ => {}
        }
    }

    fn leave(&mut self, i: usize) {
        match self.func {
            "sum_over_time" | "avg_over_time" => self.sum.remove(self.points[i].1),
            "min_over_time" | "max_over_time" if self.queue.front() == Some(&i) => {
                self.queue.pop_front();
            }
            _ => {}
        }
    }

    /// `rate`/`increase` as [`functions::apply`] computes them, the resets within the window
    /// added back in the same order.
    fn extrapolated(&self, start: i64, end: i64, range: i64) -> (Option<f64>, usize) {
        let points = &self.points[self.lo..self.hi];
        let from = self.resets.partition_point(|&r| r <= self.lo);
        let inside = self.resets[from..].iter().take_while(|&&r| r < self.hi);
        let mut result = points[points.len() - 1].1 - points[0].1;
        if points[0].1 < 0.0 {
            // the first sample below the initial 0 of Prometheus' loop
            result += 0.0;
        }
        let mut walked = 0;
        for &r in inside {
            result += self.points[r - 1].1;
            walked += 1;
        }
        (functions::extrapolate(result, points, start, end, range, self.func == "rate"), walked)
    }
}

/// A running sum of the finite values that enter and leave, compensated (Neumaier), with the
/// NaN and infinite values counted apart so that they leave without a trace.
#[derive(Debug, Default)]
struct RunningSum {
    sum: f64,
    compensation: f64,
    nan: usize,
    pos_inf: usize,
    neg_inf: usize,
}

impl RunningSum {
    fn add(&mut self, v: f64) {
        self.count(v, true);
    }

    fn remove(&mut self, v: f64) {
        self.count(v, false);
    }

    fn count(&mut self, v: f64, enters: bool) {
        let step = |n: &mut usize| *n = if enters { *n + 1 } else { n.saturating_sub(1) };
        if v.is_nan() {
            step(&mut self.nan);
        } else if v == f64::INFINITY {
            step(&mut self.pos_inf);
        } else if v == f64::NEG_INFINITY {
            step(&mut self.neg_inf);
        } else {
            let v = if enters { v } else { -v };
            let t = self.sum + v;
            if self.sum.abs() >= v.abs() {
                self.compensation += (self.sum - t) + v;
            } else {
                self.compensation += (v - t) + self.sum;
            }
            self.sum = t;
        }
    }

    /// The sum; None when the finite values overflowed (the caller sums the window anew).
    fn value(&self) -> Option<f64> {
        if self.nan > 0 || (self.pos_inf > 0 && self.neg_inf > 0) {
            return Some(f64::NAN);
        }
        if self.pos_inf > 0 {
            return Some(f64::INFINITY);
        }
        if self.neg_inf > 0 {
            return Some(f64::NEG_INFINITY);
        }
        let sum = self.sum + self.compensation;
        (self.sum.is_finite() && self.compensation.is_finite() && sum.is_finite()).then_some(sum)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every function, slid over windows of every size, against the whole-window computation.
    #[test]
    fn sliding_answers_as_the_whole_window() {
        // a counter with resets, a NaN, an infinity and big and small values
        let mut points: Vec<(i64, f64)> = Vec::new();
        let mut v = 0.0;
        for i in 0..3000i64 {
            v += ((i * 7919) % 13) as f64;
            if i % 401 == 0 {
                v = 1.0; // a reset
            }
            let value = match i {
                1234 => f64::NAN,
                2345 => f64::INFINITY,
                2000 => 1e12,
                _ => v,
            };
            points.push((i * 1000 + (i % 3), value));
        }
        for func in functions::RANGE_FUNCTIONS {
            for (range, step) in [(5_000, 1_000), (100_000, 7_000), (400_000, 3_000), (1_000_000, 50_000)] {
                let mut sliding = Sliding::new(func, &points);
                let mut t = 0;
                while t < 3_100_000 {
                    let (start, end) = (t - range, t);
                    let whole: Vec<(i64, f64)> =
                        points.iter().copied().filter(|p| p.0 >= start && p.0 <= end).collect();
                    let expected = functions::apply(func, &whole, start, end, range);
                    let (got, _) = sliding.at(start, end, range);
                    let same = match (expected, got) {
                        (None, None) => true,
                        (Some(a), Some(b)) => {
                            (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
                        }
                        _ => false,
                    };
                    assert!(same, "{func} [{start}, {end}]: {expected:?} != {got:?}");
                    t += step;
                }
            }
        }
    }

    #[test]
    fn a_running_sum_forgets_what_left() {
        let mut s = RunningSum::default();
        for v in [1e16, 1.0, f64::NAN, -1e16, f64::INFINITY] {
            s.add(v);
        }
        assert!(s.value().is_some_and(f64::is_nan));
        s.remove(f64::NAN);
        assert_eq!(s.value(), Some(f64::INFINITY));
        s.remove(f64::INFINITY);
        assert_eq!(s.value(), Some(1.0));
        s.remove(1e16);
        s.remove(-1e16);
        assert_eq!(s.value(), Some(1.0));
        s.add(f64::MAX);
        s.add(f64::MAX);
        assert_eq!(s.value(), None);
    }
}
