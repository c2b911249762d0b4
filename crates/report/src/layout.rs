//! Which settings runs share, which vary, and the sweep they form.
//!
//! A run's *settings* are its model, its `max_concurrency`, `num_prompts` and request rate,
//! and its labels (a label with the key of one of those fills it in when the run lacks it, as
//! for reports imported with a `num_prompts:` heading). Settings equal in every run are
//! *common*; the others *vary* and name the runs.
//!
//! A **sweep** needs a numeric setting that varies: the *axis*. `--by KEY` names it; without
//! it the first varying numeric setting among `max_concurrency`, `concurrency`, `num_prompts`,
//! `request_rate` and `rate` is taken, else the varying numeric setting with the most distinct
//! values. The runs that have the axis are split into *series* by their other varying
//! settings (a model, a prompt length), and each series holds at most one run per axis value;
//! runs without the axis, or with the axis value and settings of an earlier run, stay outside
//! the sweep. There is a sweep only when some series has two points or more.

use servebench_store::StoredRun;

use crate::ReportError;

/// Settings that are the load put on the server, in the order an axis is chosen from them.
pub const LOAD_KEYS: [&str; 5] = ["max_concurrency", "concurrency", "num_prompts", "request_rate", "rate"];

/// A run's settings: `(key, value)` in a stable order.
pub fn settings(run: &StoredRun) -> Vec<(String, String)> {
    let row = &run.row;
    let s = &run.summary;
    let mut out: Vec<(String, String)> = Vec::new();
    let put = |out: &mut Vec<(String, String)>, key: &str, value: String| match out.iter().position(|(k, _)| k == key) {
        Some(i) if out[i].1 != value => out.push((format!("label.{key}"), value)),
        Some(_) => {}
        None => out.push((key.to_string(), value)),
    };
    if let Some(model) = &row.model {
        put(&mut out, "model", model.clone());
    }
    if let Some(c) = s.max_concurrency {
        put(&mut out, "max_concurrency", c.to_string());
    }
    if let Some(n) = row.num_prompts {
        put(&mut out, "num_prompts", n.to_string());
    }
    if let Some(rate) = s.request_rate {
        put(&mut out, "request_rate", number_text(rate));
    }
    for (k, v) in &row.labels {
        put(&mut out, k, v.clone());
    }
    // The model names a run best: first, also when only a label gives it.
    if let Some(i) = out.iter().position(|(k, _)| k == "model") {
        let model = out.remove(i);
        out.insert(0, model);
    }
    out
}

pub use servebench_core::threshold::number_text;

/// `key=value`, or the value alone for a model.
pub fn setting_text(key: &str, value: &str) -> String {
    if key == "model" { value.to_string() } else { format!("{key}={value}") }
}

/// One series of a sweep: runs that differ only in the axis.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// The other varying settings, as text (`Qwen/Qwen3-8B`, `seq_length=80`); empty when
    /// the axis is the only setting that varies.
    pub name: String,
    /// `(axis value, run index)` by rising axis value.
    pub points: Vec<(f64, usize)>,
}

/// Runs along one numeric axis.
#[derive(Clone, Debug, PartialEq)]
pub struct Sweep {
    /// The setting that varies along the sweep.
    pub axis: String,
    /// Its distinct values, rising.
    pub values: Vec<f64>,
    /// The runs on the axis, grouped by their other varying settings.
    pub series: Vec<Series>,
    /// Runs left out of the sweep, with the reason.
    pub outside: Vec<(usize, String)>,
    /// Other settings that change with the axis, one value per axis value (a prompt count
    /// scaled with the concurrency); they do not split the runs into series.
    pub follow: Vec<String>,
}

impl Sweep {
    /// `num_prompts=64`.
    pub fn at(&self, value: f64) -> String {
        format!("{}={}", self.axis, number_text(value))
    }

    /// The run of `series` at `value`.
    pub fn point(&self, series: &Series, value: f64) -> Option<usize> {
        series.points.iter().find(|(v, _)| *v == value).map(|&(_, i)| i)
    }
}

/// How a set of runs relates.
#[derive(Clone, Debug, PartialEq)]
pub struct Layout {
    /// Settings every run has with the same value.
    pub common: Vec<(String, String)>,
    /// Keys of the settings that differ between runs (or that only some runs have).
    pub varying: Vec<String>,
    /// Each run's settings.
    pub settings: Vec<Vec<(String, String)>>,
    /// Each run's name: its varying settings, or `#ID` when nothing varies.
    pub names: Vec<String>,
    /// The sweep the runs form, if any (see the module docs).
    pub sweep: Option<Sweep>,
}

impl Layout {
    /// How a chart names run `i` (whose store id is `id`): `#id` followed by its name, or `#id`
    /// alone when nothing tells it apart from the others (its name is then `#id` already).
    pub fn chart_name(&self, id: i64, i: usize) -> String {
        let tag = format!("#{id}");
        match self.names.get(i) {
            Some(name) if *name != tag => format!("{tag} {name}"),
            _ => tag,
        }
    }

    /// Lays out `runs`; `by` names the sweep axis.
    pub fn new(runs: &[StoredRun], by: Option<&str>) -> Result<Layout, ReportError> {
        let settings: Vec<Vec<(String, String)>> = runs.iter().map(settings).collect();
        let get = |i: usize, key: &str| settings[i].iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str());
        let mut keys: Vec<String> = Vec::new();
        for s in &settings {
            for (k, _) in s {
                if !keys.contains(k) {
                    keys.push(k.clone());
                }
            }
        }
        let mut common = Vec::new();
        let mut varying = Vec::new();
        for key in keys {
            let first = get(0, &key);
            if first.is_some() && (0..runs.len()).all(|i| get(i, &key) == first) {
                common.push((key, first.unwrap_or_default().to_string()));
            } else {
                varying.push(key);
            }
        }
        let names = (0..runs.len())
            .map(|i| {
                let parts: Vec<String> = varying.iter().filter_map(|k| get(i, k).map(|v| setting_text(k, v))).collect();
                if parts.is_empty() { format!("#{}", runs[i].row.id) } else { parts.join(" ") }
            })
            .collect();
        let mut layout = Layout { common, varying, settings, names, sweep: None };
        let axis = match by {
            Some(key) => Some(layout.check_axis(key)?),
            None => layout.pick_axis(),
        };
        if let Some(axis) = axis {
            let sweep = layout.sweep_along(runs, &axis);
            if sweep.series.iter().any(|s| s.points.len() >= 2) {
                layout.sweep = Some(sweep);
            } else if by.is_some() {
                return Err(ReportError::BadAxis {
                    key: axis,
                    why: "no two runs differ only in it, so there is no sweep along it".into(),
                });
            }
        }
        Ok(layout)
    }

    /// The value of setting `key` of run `i`.
    pub fn setting(&self, i: usize, key: &str) -> Option<&str> {
        self.settings[i].iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// The finite values of `key` in the runs that have it, when every value is a number
    /// (`inf`, a request rate that sends everything at once, counts as one but has no place on
    /// an axis).
    fn numeric(&self, key: &str) -> Option<Vec<f64>> {
        let mut values = Vec::new();
        for i in 0..self.settings.len() {
            if let Some(v) = self.setting(i, key) {
                let x: f64 = v.trim().parse().ok().filter(|x: &f64| !x.is_nan())?;
                if x.is_finite() {
                    values.push(x);
                }
            }
        }
        Some(values)
    }

    fn distinct(values: &[f64]) -> Vec<f64> {
        let mut d = values.to_vec();
        d.sort_by(f64::total_cmp);
        d.dedup();
        d
    }

    fn pick_axis(&self) -> Option<String> {
        let candidates: Vec<(&String, usize)> = self
            .varying
            .iter()
            .filter_map(|k| self.numeric(k).map(|v| (k, Self::distinct(&v).len())))
            .filter(|&(_, n)| n >= 2)
            .collect();
        for load in LOAD_KEYS {
            if let Some((k, _)) = candidates.iter().find(|(k, _)| k.as_str() == load) {
                return Some((*k).clone());
            }
        }
        let most = candidates.iter().map(|&(_, n)| n).max()?;
        candidates.iter().find(|&&(_, n)| n == most).map(|(k, _)| (*k).clone())
    }

    fn check_axis(&self, key: &str) -> Result<String, ReportError> {
        let bad = |why: &str| ReportError::BadAxis { key: key.to_string(), why: why.to_string() };
        if self.common.iter().any(|(k, _)| k == key) {
            return Err(bad("every run has the same value"));
        }
        if !self.varying.iter().any(|k| k == key) {
            let known: Vec<&str> = self.varying.iter().map(String::as_str).collect();
            return Err(bad(&format!(
                "no run has this setting; the settings that vary are: {}",
                if known.is_empty() { "none".to_string() } else { known.join(", ") }
            )));
        }
        if self.numeric(key).is_none() {
            return Err(bad("its values are not all numbers"));
        }
        Ok(key.to_string())
    }

    /// The axis value of run `i`: `Err` with the reason when it has none.
    fn axis_value(&self, i: usize, axis: &str) -> Result<f64, String> {
        match self.setting(i, axis).map(|v| v.trim().parse::<f64>()) {
            Some(Ok(x)) if x.is_finite() => Ok(x),
            Some(_) => {
                Err(format!("its {axis} is {}, which has no place on the axis", self.setting(i, axis).unwrap_or("")))
            }
            None => Err(format!("it has no {axis}")),
        }
    }

    /// Whether setting `key` follows the axis among the runs on it: one value of it per axis
    /// value, and more than one in all (`num_prompts` scaled with `max_concurrency`).
    fn follows(&self, key: &str, axis: &str) -> bool {
        let mut seen: Vec<(f64, Option<&str>)> = Vec::new();
        for i in 0..self.settings.len() {
            let Ok(x) = self.axis_value(i, axis) else { continue };
            let v = self.setting(i, key);
            match seen.iter().find(|(y, _)| *y == x) {
                Some((_, w)) if *w != v => return false,
                Some(_) => {}
                None => seen.push((x, v)),
            }
        }
        let first = seen.first().map(|(_, v)| *v);
        seen.iter().any(|(_, v)| Some(*v) != first)
    }

    fn sweep_along(&self, runs: &[StoredRun], axis: &str) -> Sweep {
        let mut series: Vec<Series> = Vec::new();
        let mut outside = Vec::new();
        let (follow, others): (Vec<&String>, Vec<&String>) =
            self.varying.iter().filter(|k| k.as_str() != axis).partition(|k| self.follows(k, axis));
        let mut values = Vec::new();
        for i in 0..runs.len() {
            let x = match self.axis_value(i, axis) {
                Ok(x) => x,
                Err(why) => {
                    outside.push((i, why));
                    continue;
                }
            };
            let name: Vec<String> =
                others.iter().filter_map(|k| self.setting(i, k).map(|v| setting_text(k, v))).collect();
            let name = name.join(" ");
            let p = series.iter().position(|s| s.name == name).unwrap_or_else(|| {
                series.push(Series { name, points: Vec::new() });
                series.len() - 1
            });
            let s = &mut series[p];
            if let Some(&(_, j)) = s.points.iter().find(|(v, _)| *v == x) {
                outside.push((i, format!("same settings as run {}", runs[j].row.id)));
                continue;
            }
            s.points.push((x, i));
            values.push(x);
        }
        for s in &mut series {
            s.points.sort_by(|a, b| a.0.total_cmp(&b.0));
        }
        let follow = follow.into_iter().cloned().collect();
        Sweep { axis: axis.to_string(), values: Self::distinct(&values), series, outside, follow }
    }

    /// The common load settings as a phrase: `at max_concurrency=4`; empty when none.
    pub fn common_load(&self) -> String {
        let parts: Vec<String> = LOAD_KEYS
            .iter()
            .filter_map(|k| self.common.iter().find(|(c, _)| c == k))
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        if parts.is_empty() { String::new() } else { format!("at {}", parts.join(", ")) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{reference_000, reference_001, reference_001_short};

    #[test]
    fn the_000_models_vary_only_in_the_model() {
        let runs = reference_000();
        let layout = Layout::new(&runs, None).unwrap();
        assert_eq!(layout.varying, ["model"]);
        assert_eq!(layout.common, [("max_concurrency".to_string(), "4".to_string())]);
        assert_eq!(layout.names[0], "Qwen/Qwen3-8B");
        assert_eq!(layout.sweep, None);
        assert_eq!(layout.common_load(), "at max_concurrency=4");
        let err = Layout::new(&runs, Some("max_concurrency")).unwrap_err();
        assert!(err.to_string().contains("every run has the same value"), "{err}");
        let err = Layout::new(&runs, Some("model")).unwrap_err();
        assert!(err.to_string().contains("not all numbers"), "{err}");
        let err = Layout::new(&runs, Some("gpu")).unwrap_err();
        assert!(err.to_string().contains("the settings that vary are: model"), "{err}");
    }

    #[test]
    fn charts_name_a_run_by_its_number_once() {
        let runs = reference_000();
        let layout = Layout::new(&runs, None).unwrap();
        assert_eq!(layout.chart_name(runs[0].row.id, 0), format!("#{} Qwen/Qwen3-8B", runs[0].row.id));
        let one = &runs[..1];
        let alone = Layout::new(one, None).unwrap();
        assert_eq!(alone.chart_name(one[0].row.id, 0), format!("#{}", one[0].row.id));
    }

    #[test]
    fn the_001_sweep_runs_along_num_prompts_in_two_series() {
        let runs = reference_001();
        let layout = Layout::new(&runs, None).unwrap();
        assert_eq!(layout.varying, ["num_prompts", "seq_length", "num_prompt"]);
        let sweep = layout.sweep.as_ref().unwrap();
        assert_eq!(sweep.axis, "num_prompts");
        assert_eq!(sweep.values.len(), 12);
        let names: Vec<&str> = sweep.series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["seq_length=80", "seq_length=10000"]);
        assert_eq!(sweep.series[0].points.len(), 12);
        assert_eq!(sweep.series[1].points.len(), 7);
        assert_eq!(sweep.series[1].points[6], (64.0, 18));
        let outside: Vec<usize> = sweep.outside.iter().map(|(i, _)| *i).collect();
        assert_eq!(outside, [19, 20, 21, 22]);
        assert_eq!(sweep.outside[0].1, "it has no num_prompts");
        assert_eq!(layout.names[19], "seq_length=10000 num_prompt=1");

        // The short prompts alone: one unnamed series.
        let short = reference_001_short();
        let layout = Layout::new(&short, None).unwrap();
        let sweep = layout.sweep.unwrap();
        assert_eq!(sweep.series.len(), 1);
        assert_eq!(sweep.series[0].name, "");
        assert_eq!(sweep.at(2048.0), "num_prompts=2048");
    }

    #[test]
    fn runs_with_the_same_settings_stay_outside_the_sweep() {
        let mut runs = reference_001_short();
        runs.push(runs[3].clone());
        runs.last_mut().unwrap().row.id = 99;
        let sweep = Layout::new(&runs, Some("num_prompts")).unwrap().sweep.unwrap();
        assert_eq!(sweep.outside, [(12, "same settings as run 4".to_string())]);
    }

    #[test]
    fn a_prompt_count_scaled_with_the_concurrency_does_not_split_the_series() {
        use servebench_core::metrics::Summary;
        use servebench_store::{NewRun, RunKind};

        use crate::testutil::stored;
        let run = |model: &str, c: u64, rate: f64| {
            let summary = Summary { max_concurrency: Some(c), request_rate: Some(rate), ..Summary::default() };
            let mut new = NewRun::from_summary(RunKind::Import, summary).with_label("model", model);
            new.num_prompts = Some(c * 10);
            new
        };
        let runs = stored(&[
            run("a", 1, 1.0),
            run("a", 4, f64::INFINITY),
            run("a", 8, 1.0),
            run("b", 1, 1.0),
            run("b", 4, 1.0),
            run("b", 8, 1.0),
        ]);
        let layout = Layout::new(&runs, None).unwrap();
        assert_eq!(layout.varying, ["model", "max_concurrency", "num_prompts", "request_rate"]);
        let sweep = layout.sweep.unwrap();
        assert_eq!(sweep.axis, "max_concurrency");
        assert_eq!(sweep.follow, ["num_prompts"]);
        let names: Vec<&str> = sweep.series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["a request_rate=1", "a request_rate=inf", "b request_rate=1"]);
        assert_eq!(sweep.series[0].points, [(1.0, 0), (8.0, 2)]);

        // A rate sweep with an `inf` point: the point stays outside.
        let runs = stored(&[run("a", 4, 1.0), run("a", 4, 2.0), run("a", 4, f64::INFINITY)]);
        let sweep = Layout::new(&runs, None).unwrap().sweep.unwrap();
        assert_eq!(sweep.axis, "request_rate");
        assert_eq!(sweep.values, [1.0, 2.0]);
        assert_eq!(sweep.outside, [(2, "its request_rate is inf, which has no place on the axis".to_string())]);
    }

    #[test]
    fn numbers_print_as_settings_do() {
        assert_eq!(number_text(4.0), "4");
        assert_eq!(number_text(2.5), "2.5");
        assert_eq!(number_text(f64::INFINITY), "inf");
        assert_eq!(setting_text("model", "m"), "m");
        assert_eq!(setting_text("tp", "2"), "tp=2");
    }
}
