//! `bench sweep plot`: vLLM's charts of a parameter sweep's results, read from every
//! `summary.json` under the results folder (each a list of runs: the result JSON with the
//! run's parameters; the reading `plot_pareto` shares), drawn as SVG figures by the report's
//! charts instead of matplotlib's PNGs. The runs' selection, grouping and file names are
//! vLLM's (`vllm/benchmarks/sweep/plot.py`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use serde_json::{Map, Value};
use servebench_core::vllm::read_documents;
use servebench_report::svg::{self, Axis, Line, LineChart};

use super::params::{Item, py_str, sanitize};
use super::py_dict;
use crate::cli::sweep_serve_args::SweepPlotArgs;
use crate::commands::inputs::files_of;
use crate::output::Sink;

pub(super) type Record = Map<String, Value>;

/// A variable's value as a number: a JSON number, or the strings `inf`, `-inf` and `nan` vLLM
/// writes for floats JSON cannot hold (`request_rate: "inf"`).
pub(super) fn number(v: Option<&Value>) -> Option<f64> {
    match v? {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => match s.as_str() {
            "inf" => Some(f64::INFINITY),
            "-inf" => Some(f64::NEG_INFINITY),
            "nan" => Some(f64::NAN),
            _ => None,
        },
        _ => None,
    }
}

/// Every run of every `summary.json` under `dir`, files in path order.
pub(super) fn read_runs(dir: &Path) -> anyhow::Result<Vec<Record>> {
    if !dir.is_dir() {
        bail!("no parameter sweep results under {}: give the folder `bench sweep serve -o` wrote", dir.display());
    }
    let summaries = |p: &Path| p.file_name().is_some_and(|n| n == "summary.json");
    let files = files_of(dir, summaries, "parameter sweep results (summary.json)")?.files;
    let mut runs = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).with_context(|| format!("cannot read {}", file.display()))?;
        // Core's reader: Python's `NaN` and `Infinity` (a run's figure `json.dump` could not
        // write as JSON) read as absent, not as a broken file.
        for doc in read_documents(&text) {
            let not_summary = || format!("{} is not a sweep summary (a JSON list of runs)", file.display());
            let doc = doc.with_context(not_summary)?;
            if doc.item.is_none() {
                bail!(not_summary());
            }
            let at = doc.item_suffix();
            match doc.value {
                Value::Object(m) => runs.push(m),
                other => bail!("{}{at} holds {other} where a run (a JSON object) was expected", file.display()),
            }
        }
    }
    if runs.is_empty() {
        bail!("the parameter sweep results under {} hold no runs", dir.display());
    }
    Ok(runs)
}

/// A comparison `--filter-by` applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    Le,
    Ge,
    Lt,
    Gt,
}

/// The operators, longer ones first (as vLLM matches them).
const OPS: [(&str, Op); 6] =
    [("==", Op::Eq), ("!=", Op::Ne), ("<=", Op::Le), (">=", Op::Ge), ("<", Op::Lt), (">", Op::Gt)];

/// One `--filter-by` condition.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Filter {
    var: String,
    op: Op,
    target: String,
}

/// `--filter-by`'s comma-separated conditions.
pub(super) fn parse_filters(s: &str) -> anyhow::Result<Vec<Filter>> {
    let items = s.split(',').filter(|i| !i.trim().is_empty());
    items
        .map(|item| {
            let Some(&(text, op)) = OPS.iter().find(|(text, _)| item.contains(text)) else {
                bail!("--filter-by {item:?} has no operator: write VAR<OP>VALUE with OP one of ==, !=, <=, >=, <, >")
            };
            let (var, target) = item.split_once(text).unwrap_or_default();
            let target = target.trim().trim_matches(['\'', '"']).to_string();
            if var.trim().is_empty() || target.is_empty() {
                bail!("--filter-by {item:?}: write VAR{text}VALUE, both sides given");
            }
            if !matches!(op, Op::Eq | Op::Ne) && target.parse::<f64>().is_err() {
                bail!("--filter-by {item:?}: {target:?} is not a number to compare with");
            }
            Ok(Filter { var: var.trim().to_string(), op, target })
        })
        .collect()
}

impl Filter {
    /// Whether `run` passes: `==` and `!=` compare numbers where the value given is one, else
    /// the text; a run without the variable passes only `!=`.
    fn keeps(&self, run: &Record) -> anyhow::Result<bool> {
        let v = run.get(&self.var).filter(|v| !v.is_null());
        if matches!(self.op, Op::Eq | Op::Ne) {
            let equal = match (self.target.parse::<f64>(), v) {
                (Ok(t), Some(v)) => number(Some(v)) == Some(t),
                (Err(_), Some(v)) => py_str(v) == self.target,
                (_, None) => false,
            };
            return Ok(equal == (self.op == Op::Eq));
        }
        let t: f64 = self.target.parse().unwrap_or(f64::NAN);
        let Some(v) = v else { return Ok(false) };
        let x = number(Some(v)).ok_or_else(|| anyhow::anyhow!("{} is {v} in a run, not a number", self.var))?;
        Ok(match self.op {
            Op::Le => x <= t,
            Op::Ge => x >= t,
            Op::Lt => x < t,
            Op::Gt => x > t,
            Op::Eq | Op::Ne => unreachable!("compared above"),
        })
    }
}

/// Whether `run` passes every filter.
fn passes(filters: &[Filter], run: &Record) -> anyhow::Result<bool> {
    for filter in filters {
        if !filter.keeps(run)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// One `--bin-by` rule: `var` rounded down to a multiple of `size`.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Bin {
    var: String,
    size: f64,
}

/// `--bin-by`'s comma-separated `VAR%SIZE` rules.
pub(super) fn parse_bins(s: &str) -> anyhow::Result<Vec<Bin>> {
    let items = s.split(',').filter(|i| !i.trim().is_empty());
    items
        .map(|item| {
            let Some((var, size)) = item.split_once('%') else { bail!("--bin-by {item:?}: write VAR%SIZE") };
            match size.trim().parse::<f64>() {
                Ok(size) if size > 0.0 && size.is_finite() => Ok(Bin { var: var.trim().to_string(), size }),
                _ => bail!("--bin-by {item:?}: the bin size must be a number above 0"),
            }
        })
        .collect()
}

impl Bin {
    fn apply(&self, run: &mut Record) -> anyhow::Result<()> {
        let Some(v) = run.get(&self.var).filter(|v| !v.is_null()) else { return Ok(()) };
        let x =
            number(Some(v)).ok_or_else(|| anyhow::anyhow!("--bin-by {}: {v} in a run is not a number", self.var))?;
        run.insert(self.var.clone(), Value::from((x / self.size).floor() * self.size));
        Ok(())
    }
}

/// A run's values of `keys` as `(key, text)`, Python's `str` of each (`nan` where it has none).
fn group_of(run: &Record, keys: &[String]) -> Vec<(String, String)> {
    keys.iter()
        .map(|k| (k.clone(), run.get(k).filter(|v| !v.is_null()).map(py_str).unwrap_or_else(|| "nan".into())))
        .collect()
}

/// `k=v` pairs joined, as vLLM names a figure's rows, columns and curves.
fn label(group: &[(String, String)], sep: &str) -> String {
    group.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(sep)
}

/// A run's row, column or curve: its values of `keys` as one label (empty without keys).
fn facet(run: &Record, keys: &[String]) -> String {
    label(&group_of(run, keys), ", ")
}

/// Groups in the order their first member comes (vLLM's `full_groupby`).
pub(super) fn group_by<T, K: PartialEq>(items: impl IntoIterator<Item = T>, key: impl Fn(&T) -> K) -> Vec<(K, Vec<T>)> {
    let mut groups: Vec<(K, Vec<T>)> = Vec::new();
    for item in items {
        let k = key(&item);
        match groups.iter_mut().find(|(g, _)| *g == k) {
            Some((_, members)) => members.push(item),
            None => groups.push((k, vec![item])),
        }
    }
    groups
}

/// `--fig-by`, `--row-by`, `--col-by`, `--curve-by`: comma-separated names.
fn names(s: &str) -> Vec<String> {
    s.split(',').map(str::trim).filter(|n| !n.is_empty()).map(String::from).collect()
}

/// An axis of `scale` (`--scale-x`, `--scale-y`): linear unless log.
fn axis(var: &str, scale: Option<&str>, flag: &str) -> anyhow::Result<Axis> {
    match scale {
        None | Some("linear") => Ok(Axis { from_zero: false, ..Axis::linear(var) }),
        Some("log") => Ok(Axis::log(var)),
        Some(other) => bail!("{flag} {other:?}: the figures draw linear and log axes; give one of them"),
    }
}

/// The figure's file: `NAME-k=v-...` sanitized, as SVG.
fn figure_path(dir: &Path, name: &str, group: &[(String, String)]) -> PathBuf {
    let mut parts = vec![name.to_string()];
    parts.extend(group.iter().map(|(k, v)| format!("{k}={v}")));
    dir.join(sanitize(&format!("{}.svg", parts.join("-"))))
}

/// Python's repr of a group as a dict of strings, as vLLM prints it.
fn group_repr(group: &[(String, String)]) -> String {
    py_dict(&Item(group.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect()))
}

/// `bench sweep plot`.
pub fn plot(args: &SweepPlotArgs, out: &Sink) -> anyhow::Result<ExitCode> {
    let runs = read_runs(&args.output_dir)?;
    let (fig_by, row_by, col_by, curve_by) =
        (names(&args.fig_by), names(&args.row_by), names(&args.col_by), names(&args.curve_by));
    let filters = parse_filters(&args.filter_by)?;
    let bins = parse_bins(&args.bin_by)?;
    let x_axis = axis(&args.var_x, args.scale_x.as_deref(), "--scale-x")?;
    let y_axis = axis(&args.var_y, args.scale_y.as_deref(), "--scale-y")?;
    let mut seen: Vec<&String> = Vec::new();
    for k in runs.iter().flat_map(|r| r.keys()) {
        if !seen.contains(&k) {
            seen.push(k);
        }
    }
    let wanted = [("var_x", &args.var_x)].into_iter().chain([("var_y", &args.var_y)]);
    let grouped = [("fig_by", &fig_by), ("row_by", &row_by), ("col_by", &col_by), ("curve_by", &curve_by)];
    let wanted = wanted.chain(grouped.iter().flat_map(|(what, ks)| ks.iter().map(move |k| (*what, k))));
    for (what, k) in wanted {
        if !seen.contains(&k) {
            let available: Vec<&str> = seen.iter().map(|s| s.as_str()).collect();
            bail!("cannot find {what}={k:?} in the sweep's results; its variables: {}", available.join(", "));
        }
    }
    let fig_dir = args.fig_dir.as_ref().map_or_else(|| args.output_dir.clone(), |d| args.output_dir.join(d));
    for (fig_group, members) in group_by(&runs, |r| group_of(r, &fig_by)) {
        let path = figure_path(&fig_dir, &args.fig_name, &fig_group);
        let rows = group_by(members.iter().copied(), |r| facet(r, &row_by));
        let cols = rows.iter().map(|(_, rs)| group_by(rs, |r| facet(r, &col_by)).len()).max().unwrap_or(0);
        out.line("[BEGIN FIGURE]")?;
        out.line(format!("Group: {}", group_repr(&fig_group)))?;
        out.line(format!("Grid: {} rows x {cols} cols", rows.len()))?;
        out.line(format!("Output file: {}", path.display()))?;
        if !args.dry_run {
            let mut kept = Vec::new();
            for run in members {
                if passes(&filters, run)? {
                    let mut run = run.clone();
                    for bin in &bins {
                        bin.apply(&mut run)?;
                    }
                    kept.push(run);
                }
            }
            let figure = Figure {
                args,
                x_axis: &x_axis,
                y_axis: &y_axis,
                row_by: &row_by,
                col_by: &col_by,
                curve_by: &curve_by,
            };
            let title = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
            crate::commands::write_file(&path, &figure.draw(&title, &kept))?;
        }
        out.line("[END FIGURE]")?;
    }
    Ok(ExitCode::SUCCESS)
}

/// How a `plot` figure lays out its runs.
struct Figure<'a> {
    args: &'a SweepPlotArgs,
    x_axis: &'a Axis,
    y_axis: &'a Axis,
    row_by: &'a [String],
    col_by: &'a [String],
    curve_by: &'a [String],
}

impl Figure<'_> {
    /// The figure of `runs` (filtered and binned): a panel per row and column value, a curve
    /// per curve value, the mean of `var_y` at each `var_x`.
    fn draw(&self, title: &str, runs: &[Record]) -> String {
        let row_keys: Vec<String> = group_by(runs, |r| facet(r, self.row_by)).into_iter().map(|(k, _)| k).collect();
        let col_keys: Vec<String> = group_by(runs, |r| facet(r, self.col_by)).into_iter().map(|(k, _)| k).collect();
        let mut grid = Vec::new();
        for (r, row) in row_keys.iter().enumerate() {
            let mut panels = Vec::new();
            for (c, col) in col_keys.iter().enumerate() {
                let here = runs.iter().filter(|run| facet(run, self.row_by) == *row && facet(run, self.col_by) == *col);
                let lines = group_by(here, |run| facet(run, self.curve_by))
                    .into_iter()
                    .map(|(name, members)| Line {
                        name: if name.is_empty() { "all runs".into() } else { name },
                        points: self.mean_curve(&members),
                        markers: true,
                        joined: true,
                        bands: Vec::new(),
                    })
                    .collect();
                let panel_title =
                    [row.as_str(), col.as_str()].into_iter().filter(|t| !t.is_empty()).collect::<Vec<_>>().join(" | ");
                panels.push(svg::line_chart(&LineChart {
                    id: format!("panel-{r}-{c}"),
                    title: panel_title,
                    x: self.x_axis.clone(),
                    y: self.y_axis.clone(),
                    lines,
                    x_unit: format!("{}=", self.args.var_x),
                    y_unit: self.args.var_y.clone(),
                }));
            }
            grid.push(panels);
        }
        svg::grid(title, &grid)
    }

    /// The mean `var_y` of the runs at each `var_x`, by `var_x`; values that are not finite
    /// numbers (or not positive on a log axis) left out.
    fn mean_curve(&self, runs: &[&Record]) -> Vec<(f64, f64)> {
        let usable = |v: f64, axis: &Axis| v.is_finite() && (axis.scale != svg::Scale::Log || v > 0.0);
        let mut sums: Vec<(f64, f64, u32)> = Vec::new();
        for run in runs {
            let (Some(x), Some(y)) = (number(run.get(&self.args.var_x)), number(run.get(&self.args.var_y))) else {
                continue;
            };
            if !(usable(x, self.x_axis) && usable(y, self.y_axis)) {
                continue;
            }
            match sums.iter_mut().find(|(sx, _, _)| *sx == x) {
                Some((_, sy, n)) => {
                    *sy += y;
                    *n += 1;
                }
                None => sums.push((x, y, 1)),
            }
        }
        sums.sort_by(|a, b| a.0.total_cmp(&b.0));
        sums.into_iter().map(|(x, sy, n)| (x, sy / f64::from(n))).collect()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    fn run(v: Value) -> Record {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn filters_compare_numbers_where_given_one_and_text_otherwise() {
        let r = run(json!({"max_concurrency": 8, "name": "big", "rate": "inf", "none": null}));
        let keeps = |s: &str| parse_filters(s).unwrap().iter().all(|f| f.keeps(&r).unwrap());
        assert!(keeps("max_concurrency==8.0") && keeps("max_concurrency<=8") && keeps("max_concurrency>7"));
        assert!(!keeps("max_concurrency<8") && !keeps("max_concurrency!=8"));
        assert!(keeps("name=='big'") && keeps("name!=\"small\"") && !keeps("name==small"));
        assert!(keeps("rate>1000000"), "vLLM's \"inf\" is a number");
        // A run without the variable passes `!=` alone.
        assert!(keeps("missing!=1") && !keeps("missing==1") && !keeps("none<5") && !keeps("missing>=0"));
        assert!(keeps("") && keeps("max_concurrency>1, name==big"));
        let err = parse_filters("name>3").unwrap()[0].keeps(&r).unwrap_err();
        assert!(err.to_string().contains("not a number"), "{err}");
    }

    #[test]
    fn bins_round_down_to_their_size_and_groups_keep_first_seen_order() {
        let bins = parse_bins("x%2.5").unwrap();
        let mut r = run(json!({"x": 7.4, "y": 1}));
        bins[0].apply(&mut r).unwrap();
        assert_eq!(r["x"], json!(5.0));
        assert!(parse_bins("x%-1").is_err() && parse_bins("x").is_err() && parse_bins("x%nan").is_err());
        let runs: Vec<Record> = [3, 1, 3, 2, 1].into_iter().map(|x| run(json!({"x": x}))).collect();
        let groups = group_by(&runs, |r| group_of(r, &["x".to_string()]));
        let order: Vec<String> = groups.iter().map(|(g, members)| format!("{}x{}", g[0].1, members.len())).collect();
        assert_eq!(order, ["3x2", "1x2", "2x1"]);
        let path = figure_path(Path::new("out"), "FIG", &[("a/b".into(), "1.5".into())]);
        assert_eq!(path, Path::new("out/FIG-a_b=1.5.svg"));
        assert_eq!(group_repr(&[("k".into(), "v".into())]), "{'k': 'v'}");
    }

    #[test]
    fn a_summary_with_python_s_nan_reads_it_as_absent() {
        let dir = tempfile::tempdir().unwrap();
        let text = "[{\"x\": 1, \"std_ttft_ms\": NaN}, {\"x\": 2, \"request_rate\": Infinity}]";
        std::fs::write(dir.path().join("summary.json"), text).unwrap();
        let runs = read_runs(dir.path()).unwrap();
        assert_eq!(runs.len(), 2);
        assert_eq!(runs[0]["std_ttft_ms"], Value::Null);
        assert_eq!(number(runs[1].get("x")), Some(2.0));
        std::fs::write(dir.path().join("summary.json"), "[1, {\"x\": 1}]").unwrap();
        let err = read_runs(dir.path()).unwrap_err().to_string();
        assert!(err.contains("(list item 0) holds 1 where a run"), "{err}");
        std::fs::write(dir.path().join("summary.json"), "[{\"x\": ").unwrap();
        let err = format!("{:#}", read_runs(dir.path()).unwrap_err());
        assert!(err.contains("is not a sweep summary"), "{err}");
    }

    proptest! {
        #[test]
        fn a_condition_reads_back_as_written(
            var in "[a-z_]{1,12}",
            op in prop::sample::select(OPS.to_vec()),
            value in -1e6f64..1e6,
        ) {
            let filters = parse_filters(&format!("{var}{}{value}", op.0)).unwrap();
            prop_assert_eq!(filters.len(), 1);
            prop_assert_eq!(&filters[0].var, &var);
            prop_assert_eq!(filters[0].op, op.1);
            prop_assert_eq!(filters[0].target.parse::<f64>().unwrap(), value);
            // The condition holds for a run whose value satisfies it, and its negation's opposite.
            let r = run(json!({ var.clone(): value }));
            let holds = filters[0].keeps(&r).unwrap();
            prop_assert_eq!(holds, matches!(op.1, Op::Eq | Op::Le | Op::Ge));
        }
    }
}
