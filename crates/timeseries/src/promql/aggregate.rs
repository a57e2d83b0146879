//! The aggregation operators of the subset: `sum`, `avg`, `min`, `max`, `count`, each with
//! `by (…)` (only those labels kept) or `without (…)` (those and `__name__` dropped), at every
//! step over the series that have a value there.

use super::limits::Budget;
use super::series::{Labels, NAME};
use super::value::StepSeries;
use mosaic_core::Result;
use std::collections::HashMap;

/// The aggregation operators the subset has.
pub const AGGREGATORS: &[&str] = &["sum", "avg", "min", "max", "count"];

/// How series are grouped.
#[derive(Debug, Clone)]
pub enum Grouping {
    /// keep only these labels
    By(Vec<String>),
    /// drop these labels and the name
    Without(Vec<String>),
}

impl Grouping {
    fn key(&self, labels: &Labels) -> Labels {
        match self {
            Grouping::By(names) => labels.iter().filter(|(n, _)| names.contains(n)).cloned().collect(),
            Grouping::Without(names) => {
                labels.iter().filter(|(n, _)| n != NAME && !names.contains(n)).cloned().collect()
            }
        }
    }
}

/// One group's running figures at one step.
#[derive(Debug, Clone, Copy)]
struct Acc {
    count: usize,
    sum: f64,
    min: f64,
    max: f64,
}

/// `op` over `series` grouped by `grouping`, at each of `steps` steps.
pub fn aggregate(
    op: &str,
    grouping: &Grouping,
    series: Vec<StepSeries>,
    steps: usize,
    budget: &mut Budget,
) -> Result<Vec<StepSeries>> {
    let mut groups: Vec<(Labels, Vec<Option<Acc>>)> = Vec::new();
    let mut index: HashMap<Labels, usize> = HashMap::new();
    for s in series {
        let key = grouping.key(&s.labels);
        let at = match index.get(&key) {
            Some(&at) => at,
            None => {
                budget.samples(steps)?;
                groups.push((key.clone(), vec![None; steps]));
                index.insert(key, groups.len() - 1);
                groups.len() - 1
            }
        };
        let accs = &mut groups[at].1;
        for (acc, v) in accs.iter_mut().zip(&s.values) {
            let Some(v) = *v else { continue };
            match acc {
                None => *acc = Some(Acc { count: 1, sum: v, min: v, max: v }),
                Some(a) => {
                    a.count += 1;
                    a.sum += v;
                    if a.min > v || a.min.is_nan() {
                        a.min = v;
                    }
                    if a.max < v || a.max.is_nan() {
                        a.max = v;
                    }
                }
            }
        }
    }
    let out = groups
        .into_iter()
        .map(|(labels, accs)| StepSeries {
            labels,
            values: accs
                .into_iter()
                .map(|acc| {
                    acc.map(|a| match op {
                        "sum" => a.sum,
                        "avg" => a.sum / a.count as f64,
                        "min" => a.min,
                        "max" => a.max,
                        _ => a.count as f64,
                    })
                })
                .collect(),
        })
        .collect();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(labels: &[(&str, &str)], values: &[Option<f64>]) -> StepSeries {
        StepSeries::of(labels, values)
    }

    #[test]
    fn groups_by_and_without() {
        let series = || {
            vec![
                s(&[(NAME, "cpu"), ("host", "a"), ("region", "eu")], &[Some(1.0), None]),
                s(&[(NAME, "cpu"), ("host", "b"), ("region", "eu")], &[Some(3.0), Some(4.0)]),
                s(&[(NAME, "cpu"), ("host", "c"), ("region", "us")], &[Some(5.0), Some(6.0)]),
            ]
        };
        let by = Grouping::By(vec!["region".into()]);
        let mut budget = Budget::new(mosaic_core::mem_budget::MemBudget::new(0));
        let out = aggregate("sum", &by, series(), 2, &mut budget).unwrap();
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].labels, vec![("region".to_owned(), "eu".to_owned())]);
        assert_eq!(out[0].values, vec![Some(4.0), Some(4.0)]);
        assert_eq!(out[1].values, vec![Some(5.0), Some(6.0)]);
        for (op, want) in [("avg", 3.0), ("min", 1.0), ("max", 5.0), ("count", 3.0), ("sum", 9.0)] {
            let all = aggregate(op, &Grouping::By(vec![]), series(), 2, &mut budget).unwrap();
            assert_eq!(all[0].labels, Labels::new());
            assert_eq!(all[0].values[0], Some(want), "{op}");
        }
        let without = aggregate("max", &Grouping::Without(vec!["host".into()]), series(), 2, &mut budget).unwrap();
        assert_eq!(without[0].labels, vec![("region".to_owned(), "eu".to_owned())]);
        assert_eq!(without[0].values, vec![Some(3.0), Some(4.0)]);
    }
}
