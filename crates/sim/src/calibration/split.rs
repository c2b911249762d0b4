//! How measured points are split for held-out validation: the groups a split makes (by label,
//! in folds, or each deployment's runs at some loads against its others), and the fits that
//! split runs, each with the points it is fitted on and those it predicts.

use super::Calibrator;
use super::points::MeasuredPoint;

/// How points are split for held-out validation.
#[derive(Clone, Debug, PartialEq)]
pub enum Split {
    /// Predict every point with the presets; fit nothing.
    None,
    /// Leave out one group at a time, the groups being the values of these label keys.
    LeaveOut(Vec<String>),
    /// `k` folds, point `i` in fold `i mod k`.
    Folds(usize),
    /// Calibrate each deployment on some of its runs and predict its others: within each group
    /// of the `per` keys' values (one group without them), fit on the points whose `key` is
    /// one of `on`, predict the rest of that group (a study's 1- and 100-prompt runs predicting
    /// its 10-prompt one).
    FitOn { key: String, on: Training, per: Vec<String> },
}

/// Which of a deployment's runs [`Split::FitOn`] fits on, by the value of its key.
#[derive(Clone, Debug, PartialEq)]
pub enum Training {
    /// The lowest and the highest value the deployment has (numbers as numbers).
    Ends,
    /// These values.
    Values(Vec<String>),
}

impl Split {
    /// Whether each deployment is fitted on its own ([`Split::FitOn`]), with no fit on every run.
    pub fn within_deployments(&self) -> bool {
        matches!(self, Split::FitOn { .. })
    }

    /// A [`Split::FitOn`] from `KEY=VALUE,VALUE` or `KEY=ends` (`--fit-on`), per `per`.
    pub fn fit_on(spec: &str, per: &[String]) -> Result<Split, String> {
        let (key, values) = spec
            .split_once('=')
            .map(|(k, v)| (k.trim(), v.trim()))
            .filter(|(k, v)| !k.is_empty() && !v.is_empty())
            .ok_or_else(|| {
                format!(
                    "--fit-on {spec}: give a label and the values to fit on, as KEY=VALUE,VALUE (e.g. \
                     num-prompts=1,100) or KEY=ends (the lowest and the highest of each deployment)"
                )
            })?;
        let on = if values.eq_ignore_ascii_case("ends") {
            Training::Ends
        } else {
            Training::Values(values.split(',').map(|v| v.trim().to_string()).filter(|v| !v.is_empty()).collect())
        };
        Ok(Split::FitOn { key: key.to_string(), on, per: per.to_vec() })
    }
}

/// One fit of a split: the points it is fitted on and those it predicts, by index.
#[derive(Clone, Debug, PartialEq)]
pub struct Fold {
    /// The held-out group (`tp=2`, `fold 3`), or the deployment of a [`Split::FitOn`].
    pub name: String,
    pub fit_on: Vec<usize>,
    pub predict: Vec<usize>,
}

/// Grouping keys every point answers from its workload where no label of its own says: the
/// axes a sweep or a study varies (`--leave-out num-prompts`: fit on two loads, predict the third).
pub const WORKLOAD_KEYS: [&str; 3] = ["num-prompts", "max-concurrency", "request-rate"];

/// A point's value for a grouping key: its label, else, for [`WORKLOAD_KEYS`], its workload's.
pub fn key_value(point: &MeasuredPoint, key: &str) -> Option<String> {
    if let Some((_, v)) = point.labels.iter().find(|(k, _)| k == key) {
        return Some(v.clone());
    }
    let w = &point.workload;
    match key {
        "num-prompts" => Some(w.num_prompts.to_string()),
        "max-concurrency" => Some(w.max_concurrency.map_or("none".to_string(), |c| c.to_string())),
        "request-rate" => Some(if w.request_rate.is_finite() { w.request_rate.to_string() } else { "inf".into() }),
        _ => None,
    }
}

/// Orders group names (`tp=2 conc=16`) value by value, numbers as numbers: `conc=4` before
/// `conc=16`, `request_rate=2.5` before `request_rate=10`.
pub(super) fn group_order(a: &str, b: &str) -> std::cmp::Ordering {
    fn key_value(part: &str) -> (&str, &str) {
        part.split_once('=').unwrap_or((part, ""))
    }
    for ((key_a, value_a), (key_b, value_b)) in a.split(' ').map(key_value).zip(b.split(' ').map(key_value)) {
        let order = key_a.cmp(key_b).then_with(|| value_order(value_a, value_b));
        if order.is_ne() {
            return order;
        }
    }
    a.cmp(b)
}

/// Orders two labels' values: finite numbers as numbers (`4` before `16`), then as text.
fn value_order(a: &str, b: &str) -> std::cmp::Ordering {
    let number = |v: &str| v.parse::<f64>().ok().filter(|x| x.is_finite());
    let by_number = match (number(a), number(b)) {
        (Some(p), Some(q)) => p.total_cmp(&q),
        _ => std::cmp::Ordering::Equal,
    };
    by_number.then_with(|| a.cmp(b))
}

/// The group name of a point for `keys`: their values joined (`tp=2 isl=1024`).
pub fn group_of(point: &MeasuredPoint, keys: &[String]) -> String {
    keys.iter().map(|k| format!("{k}={}", key_value(point, k).as_deref().unwrap_or("?"))).collect::<Vec<_>>().join(" ")
}

/// Why `keys` cannot group these points (for `flag`, `--leave-out` or `--by`): a key no point
/// has, or, to hold groups out, one group only (nothing left to fit on). `None` where they can.
pub fn keys_problem(points: &[&MeasuredPoint], keys: &[String], flag: &str) -> Option<String> {
    if let Some(missing) = keys.iter().find(|k| points.iter().all(|p| key_value(p, k).is_none())) {
        let mut known: Vec<&str> = points.iter().flat_map(|p| p.labels.iter().map(|(k, _)| k.as_str())).collect();
        known.sort_unstable();
        known.dedup();
        for key in WORKLOAD_KEYS {
            if !known.contains(&key) {
                known.push(key);
            }
        }
        return Some(format!(
            "{flag} {missing}: no result has a `{missing}` label; give one they have: {}",
            known.join(", ")
        ));
    }
    let mut groups: Vec<String> = points.iter().map(|p| group_of(p, keys)).collect();
    groups.sort();
    groups.dedup();
    (flag == "--leave-out" && groups.len() < 2).then(|| {
        format!(
            "--leave-out {}: every result is in one group ({}), so holding it out leaves nothing to fit on; leave \
             out by a label whose values differ, or use --folds N",
            keys.join(","),
            groups.first().map_or("", String::as_str)
        )
    })
}

/// The group of each point under `split`: the held-out group, or, for [`Split::FitOn`], its
/// deployment.
pub(super) fn groups_of(points: &[&MeasuredPoint], split: &Split) -> Vec<String> {
    let n = points.len();
    match split {
        Split::None => vec![String::new(); n],
        Split::LeaveOut(keys) => points.iter().map(|p| group_of(p, keys)).collect(),
        Split::Folds(k) => (0..n).map(|i| format!("fold {}", i % k.max(&1) + 1)).collect(),
        Split::FitOn { per, .. } if per.is_empty() => vec!["all results".to_string(); n],
        Split::FitOn { per, .. } => points.iter().map(|p| group_of(p, per)).collect(),
    }
}

/// The fits `split` runs, in the order of their groups' names: each group held out in turn
/// (fitted on the others), or each deployment fitted on its runs at the chosen values and
/// predicting its others. A fold with nothing to fit on (a deployment without a run at those
/// values) is kept, with `fit_on` empty, so that it can be named; [`Split::None`] has none.
pub fn folds_of(points: &[&MeasuredPoint], split: &Split) -> Vec<Fold> {
    if *split == Split::None {
        return Vec::new();
    }
    let groups = groups_of(points, split);
    let mut names = groups.clone();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .map(|name| {
            let (members, others): (Vec<usize>, Vec<usize>) = (0..points.len()).partition(|&i| groups[i] == name);
            match split {
                Split::FitOn { key, on, .. } => {
                    let value = |i: usize| key_value(points[i], key);
                    let chosen: Vec<String> = match on {
                        Training::Values(values) => values.clone(),
                        Training::Ends => ends(members.iter().filter_map(|&i| value(i))),
                    };
                    let (fit_on, predict) = members
                        .into_iter()
                        .partition(|&i| value(i).is_some_and(|v| chosen.iter().any(|c| same_value(c, &v))));
                    Fold { name, fit_on, predict }
                }
                _ => Fold { name, fit_on: others, predict: members },
            }
        })
        .collect()
}

/// The lowest and the highest of some labels' values, numbers compared as numbers.
fn ends(values: impl Iterator<Item = String>) -> Vec<String> {
    let mut values: Vec<String> = values.collect();
    values.sort_by(|a, b| value_order(a, b));
    values.first().into_iter().chain(values.last()).cloned().collect()
}

/// Whether a value given on the command line names a label's value: `4` names `4.0`, `B200`
/// names `b200`.
fn same_value(given: &str, label: &str) -> bool {
    match (given.trim().parse::<f64>(), label.trim().parse::<f64>()) {
        (Ok(x), Ok(y)) => x == y,
        _ => given.trim().eq_ignore_ascii_case(label.trim()),
    }
}

/// The fits `split` makes of the calibrator's targets ([`folds_of`]).
pub fn folds(cal: &Calibrator, split: &Split) -> Vec<Fold> {
    let points: Vec<&MeasuredPoint> = cal.targets().iter().map(|t| &t.point).collect();
    folds_of(&points, split)
}

/// How many fits `split` runs on the calibrator's targets (the groups held out, or the
/// deployments with runs to fit on).
pub fn group_count(cal: &Calibrator, split: &Split) -> usize {
    folds(cal, split).iter().filter(|f| !f.fit_on.is_empty()).count()
}

/// Why a [`Split::FitOn`] cannot run on these points: no point at the values it fits on, or
/// none left to predict. `None` where it can (and for any other split).
pub fn fit_on_problem(points: &[&MeasuredPoint], split: &Split) -> Option<String> {
    let Split::FitOn { key, on, .. } = split else { return None };
    let folds = folds_of(points, split);
    let wanted = match on {
        Training::Ends => "ends".to_string(),
        Training::Values(v) => v.join(","),
    };
    if folds.iter().all(|f| f.fit_on.is_empty()) {
        let mut have: Vec<String> = points.iter().filter_map(|p| key_value(p, key)).collect();
        have.sort_by(|a, b| value_order(a, b));
        have.dedup();
        return Some(format!(
            "--fit-on {key}={wanted}: no result has {key} {wanted}; the values they have: {}",
            have.join(", ")
        ));
    }
    folds.iter().all(|f| f.fit_on.is_empty() || f.predict.is_empty()).then(|| {
        format!(
            "--fit-on {key}={wanted}: every result is one the fits see, so none is left to predict; fit on fewer \
             values, or group deployments with --per"
        )
    })
}
