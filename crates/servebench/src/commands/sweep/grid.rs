//! The grid of a sweep: its targets and the values of each list flag, the points they form,
//! and what each point is called (labels, heading, progress line, result file suffix).

use servebench_report::layout::number_text;

use super::targets::targets;
pub use super::targets::{Target, TargetKind};
use crate::cli::BenchServeArgs;
use crate::cli::sweep_args::{SearchKey, SweepArgs};

/// A usage error in the sweep's flags.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct GridError(pub String);

pub(super) fn err<T>(msg: impl Into<String>) -> Result<T, GridError> {
    Err(GridError(msg.into()))
}

/// How many prompts each point sends.
#[derive(Clone, Debug, PartialEq)]
pub enum PromptCount {
    List(Vec<usize>),
    /// `--scale-num-prompts K`: K per unit of the load (concurrency, else rate).
    Scale(f64),
}

/// A length list flag: which flag, and its values (`None`: the flag keeps its value).
#[derive(Clone, Debug, PartialEq)]
pub struct Lengths {
    /// `input_len` or `random_input_len` (likewise for outputs): the flag that was listed.
    pub key: &'static str,
    pub values: Vec<Option<u32>>,
}

/// The grid: every combination of its values.
#[derive(Clone, Debug, PartialEq)]
pub struct Grid {
    pub targets: Vec<Target>,
    pub input: Lengths,
    pub output: Lengths,
    /// `--zip-lengths`: the input and output lengths go together, item by item.
    pub zipped: bool,
    /// `--random-batch-size` values (`None`: the flag keeps its value).
    pub batch_sizes: Vec<Option<u32>>,
    pub request_rates: Vec<f64>,
    pub max_concurrency: Vec<Option<i64>>,
    pub num_prompts: PromptCount,
    /// The setting an SLO search raises; its list stays a single placeholder in the grid.
    pub search: Option<SearchKey>,
    /// Settings the command line gives (even one value), labelled on every run: two sweeps
    /// saved under one name stay apart (`random_input_len=80`, `random_input_len=10000`).
    pub given: Vec<String>,
}

/// One point of the grid (for a search: one base point, its searched value still open).
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    pub target: usize,
    pub input_len: Option<u32>,
    pub output_len: Option<u32>,
    pub batch_size: Option<u32>,
    pub request_rate: f64,
    pub max_concurrency: Option<i64>,
    pub num_prompts: usize,
}

impl Default for Point {
    /// The first target, every flag at its value, sent at once (vLLM's rate of `inf`).
    fn default() -> Point {
        Point {
            target: 0,
            input_len: None,
            output_len: None,
            batch_size: None,
            request_rate: f64::INFINITY,
            max_concurrency: None,
            num_prompts: 0,
        }
    }
}

impl Point {
    /// The point and a repeat as one line (`target=0 input_len=128 ... repeat=2`), how a
    /// `--workers` parent tells its workers which run to send.
    pub fn to_spec(&self, repeat: u32) -> String {
        let opt = |v: Option<String>| v.unwrap_or_else(|| "-".into());
        format!(
            "target={} input_len={} output_len={} batch_size={} request_rate={} max_concurrency={} num_prompts={} repeat={repeat}",
            self.target,
            opt(self.input_len.map(|v| v.to_string())),
            opt(self.output_len.map(|v| v.to_string())),
            opt(self.batch_size.map(|v| v.to_string())),
            self.request_rate,
            opt(self.max_concurrency.map(|v| v.to_string())),
            self.num_prompts,
        )
    }

    /// Reads [`Point::to_spec`] back: the point and the repeat.
    pub fn from_spec(spec: &str) -> Result<(Point, u32), GridError> {
        let bad = || GridError(format!("{spec:?} is not a sweep run as --workers writes it"));
        let mut fields = std::collections::BTreeMap::new();
        for pair in spec.split_whitespace() {
            let (k, v) = pair.split_once('=').ok_or_else(bad)?;
            fields.insert(k, v);
        }
        let get = |k: &str| fields.get(k).copied().ok_or_else(bad);
        let opt = |k: &str| -> Result<Option<&str>, GridError> { get(k).map(|v| (v != "-").then_some(v)) };
        let num = |v: &str| v.parse::<u64>().map_err(|_| bad());
        let small = |k: &str| -> Result<Option<u32>, GridError> {
            opt(k)?.map(|v| num(v).and_then(|n| u32::try_from(n).map_err(|_| bad()))).transpose()
        };
        let point = Point {
            target: usize::try_from(num(get("target")?)?).map_err(|_| bad())?,
            input_len: small("input_len")?,
            output_len: small("output_len")?,
            batch_size: small("batch_size")?,
            request_rate: get("request_rate")?.parse().map_err(|_| bad())?,
            max_concurrency: opt("max_concurrency")?.map(|v| v.parse::<i64>().map_err(|_| bad())).transpose()?,
            num_prompts: usize::try_from(num(get("num_prompts")?)?).map_err(|_| bad())?,
        };
        let repeat = u32::try_from(num(get("repeat")?)?).map_err(|_| bad())?;
        Ok((point, repeat))
    }
}

impl Grid {
    /// Reads the grid from the flags; errors are usage errors.
    pub fn new(args: &SweepArgs) -> Result<Grid, GridError> {
        let lists = &args.lists;
        let bench = &args.bench;
        let search = args.sweep.search;
        let targets = targets(args)?;
        let input = lengths(
            ("input_len", "--input-len", &lists.input_len, bench.content.input_len),
            ("random_input_len", "--random-input-len", &lists.random_input_len),
        )?;
        let output = lengths(
            ("output_len", "--output-len", &lists.output_len, bench.content.output_len),
            ("random_output_len", "--random-output-len", &lists.random_output_len),
        )?;
        let zipped = args.sweep.zip_lengths;
        // The lengths given (a list not given is one `None`, the flag's own value).
        let (n_in, n_out) = (input.values.iter().flatten().count(), output.values.iter().flatten().count());
        if zipped && (n_in == 0 || n_in != n_out) {
            return err(format!(
                "--zip-lengths pairs the input and output lengths item by item: give both lists with as many values \
                 (here {n_in} input and {n_out} output)"
            ));
        }
        let searched = |key: SearchKey, given: bool| -> Result<(), GridError> {
            if search == Some(key) && given {
                return err(format!(
                    "leave out {}: --search {} chooses it (bound the search with --search-min and --search-max)",
                    key.flag(),
                    key.flag().trim_start_matches('-')
                ));
            }
            Ok(())
        };
        searched(SearchKey::MaxConcurrency, !lists.max_concurrency.is_empty())?;
        searched(SearchKey::RequestRate, !lists.request_rate.is_empty())?;
        let request_rates =
            if lists.request_rate.is_empty() { vec![bench.traffic.request_rate] } else { lists.request_rate.clone() };
        let batch_sizes = if lists.random_batch_size.is_empty() {
            vec![None]
        } else {
            lists.random_batch_size.iter().map(|&b| Some(b)).collect()
        };
        let max_concurrency = if lists.max_concurrency.is_empty() {
            vec![bench.traffic.max_concurrency]
        } else {
            lists.max_concurrency.iter().map(|&c| Some(c)).collect()
        };
        let num_prompts = match args.sweep.scale_num_prompts {
            Some(k) if !(k > 0.0 && k.is_finite()) => return err("--scale-num-prompts must be greater than 0"),
            Some(k) => PromptCount::Scale(k),
            None if lists.num_prompts.is_empty() => PromptCount::List(vec![bench.traffic.num_prompts]),
            None => PromptCount::List(lists.num_prompts.clone()),
        };
        let mut given: Vec<String> = Vec::new();
        if targets.iter().any(|t| t.sim().is_some()) {
            given.push("hardware".into());
        }
        for (key, listed) in [
            (input.key, !lists.input_len.is_empty() || !lists.random_input_len.is_empty()),
            (output.key, !lists.output_len.is_empty() || !lists.random_output_len.is_empty()),
            ("random_batch_size", !lists.random_batch_size.is_empty()),
            ("request_rate", !lists.request_rate.is_empty()),
            ("max_concurrency", !lists.max_concurrency.is_empty()),
            ("num_prompts", !lists.num_prompts.is_empty() || matches!(num_prompts, PromptCount::Scale(_))),
        ] {
            if listed {
                given.push(key.to_string());
            }
        }
        let grid = Grid {
            targets,
            input,
            output,
            zipped,
            batch_sizes,
            request_rates,
            max_concurrency,
            num_prompts,
            search,
            given,
        };
        if let PromptCount::Scale(_) = grid.num_prompts {
            for p in grid.points() {
                grid.scaled_prompts(&p)?;
            }
        }
        Ok(grid)
    }

    /// Every point, targets outermost, then input and output lengths (crossed, or in pairs
    /// with `--zip-lengths`), batch size, rate, concurrency and prompt count. A search's base
    /// points leave the searched setting at its flag's value.
    pub fn points(&self) -> Vec<Point> {
        let counts: Vec<Option<usize>> = match &self.num_prompts {
            PromptCount::List(v) => v.iter().map(|&n| Some(n)).collect(),
            PromptCount::Scale(_) => vec![None],
        };
        let points = along(vec![Point::default()], 0..self.targets.len(), |p, t| p.target = t);
        let points = if self.zipped {
            let pairs = self.input.values.iter().copied().zip(self.output.values.iter().copied());
            along(points, pairs, |p, (i, o)| (p.input_len, p.output_len) = (i, o))
        } else {
            let points = along(points, self.input.values.iter().copied(), |p, v| p.input_len = v);
            along(points, self.output.values.iter().copied(), |p, v| p.output_len = v)
        };
        let points = along(points, self.batch_sizes.iter().copied(), |p, v| p.batch_size = v);
        let points = along(points, self.request_rates.iter().copied(), |p, v| p.request_rate = v);
        let points = along(points, self.max_concurrency.iter().copied(), |p, v| p.max_concurrency = v);
        along(points, counts.iter().copied(), |p, n| {
            p.num_prompts = match n {
                Some(n) => n,
                None if self.search.is_none() => self.scaled_prompts(p).unwrap_or(1),
                None => 0,
            };
        })
    }

    /// The probe of a search at `value` from a base point (its prompt count scaled when asked).
    pub fn probe(&self, base: &Point, key: SearchKey, value: f64) -> Point {
        let mut p = base.clone();
        match key {
            SearchKey::MaxConcurrency => p.max_concurrency = Some(value as i64),
            SearchKey::RequestRate => p.request_rate = value,
        }
        if let PromptCount::Scale(k) = self.num_prompts {
            p.num_prompts = ((k * value).ceil() as usize).max(1);
        }
        p
    }

    /// `--scale-num-prompts`: K × the concurrency, else K × the rate.
    fn scaled_prompts(&self, p: &Point) -> Result<usize, GridError> {
        let PromptCount::Scale(k) = self.num_prompts else { return Ok(p.num_prompts) };
        if self.search.is_some() {
            return Ok(p.num_prompts);
        }
        let load = match (p.max_concurrency, p.request_rate) {
            (Some(c), _) => c as f64,
            (None, r) if r.is_finite() => r,
            _ => return err("--scale-num-prompts needs --max-concurrency (or a finite --request-rate) to scale with"),
        };
        let n = (k * load).ceil();
        if n > f64::from(u32::MAX) {
            return err(format!(
                "--scale-num-prompts {k} times a load of {load} asks for {n:.3e} prompts a point, more than one run \
                 can send ({}); lower it",
                u32::MAX
            ));
        }
        Ok((n as usize).max(1))
    }

    /// The settings of a point, in label order: the model, the simulator's hardware or the
    /// server, the lengths, rate, concurrency and prompt count.
    pub fn settings(&self, p: &Point) -> Vec<(String, String)> {
        let target = &self.targets[p.target];
        let mut out = vec![("model".to_string(), target.known_model().unwrap_or("?").to_string())];
        match &target.kind {
            TargetKind::Sim { target: sim, .. } => {
                out.push(("hardware".into(), sim.hardware.clone()));
                out.extend(sim.options.iter().cloned());
            }
            TargetKind::Server { base_url } => {
                out.push(("base_url".into(), base_url.clone().unwrap_or_else(|| "host:port".into())))
            }
        }
        if let Some(v) = p.input_len {
            out.push((self.input.key.to_string(), v.to_string()));
        }
        if let Some(v) = p.output_len {
            out.push((self.output.key.to_string(), v.to_string()));
        }
        if let Some(v) = p.batch_size {
            out.push(("random_batch_size".into(), v.to_string()));
        }
        out.push(("request_rate".into(), number_text(p.request_rate)));
        if let Some(c) = p.max_concurrency {
            out.push(("max_concurrency".into(), c.to_string()));
        }
        out.push(("num_prompts".into(), p.num_prompts.to_string()));
        out
    }

    /// The settings that differ between `points` (the model always counts: it names the runs).
    pub fn varying(&self, points: &[Point]) -> Vec<String> {
        let all: Vec<Vec<(String, String)>> = points.iter().map(|p| self.settings(p)).collect();
        let mut keys: Vec<String> = Vec::new();
        for s in &all {
            for (k, v) in s {
                if keys.contains(k) {
                    continue;
                }
                let differs = all.iter().any(|o| o.iter().find(|(ok, _)| ok == k).map(|(_, ov)| ov) != Some(v));
                if k == "model" || differs {
                    keys.push(k.clone());
                }
            }
        }
        keys
    }

    /// The `bench serve` flags of a point.
    pub fn args(&self, base: &BenchServeArgs, p: &Point) -> BenchServeArgs {
        let mut a = base.clone();
        let target = &self.targets[p.target];
        match &target.kind {
            TargetKind::Sim { spec, target: sim } => {
                a.sim.sim = Some(spec.clone());
                a.sim.sim_options = sim.options.iter().map(|(k, v)| format!("{k}={v}")).collect();
                a.endpoint.base_url = None;
            }
            TargetKind::Server { base_url } => {
                a.sim.sim = None;
                a.endpoint.base_url.clone_from(base_url);
            }
        }
        a.endpoint.model.clone_from(&target.model);
        if let Some(v) = p.input_len {
            match self.input.key {
                "input_len" => a.content.input_len = Some(v),
                _ => a.dataset.random_input_len = v,
            }
        }
        if let Some(v) = p.output_len {
            match self.output.key {
                "output_len" => a.content.output_len = Some(v),
                _ => a.dataset.random_output_len = v,
            }
        }
        if let Some(v) = p.batch_size {
            a.dataset.random_batch_size = v;
        }
        a.traffic.request_rate = p.request_rate;
        a.traffic.max_concurrency = p.max_concurrency;
        a.traffic.num_prompts = p.num_prompts;
        a
    }
}

/// A length axis from its general flag (`--input-len`) and its random-dataset flag: the listed
/// one, or a single point that keeps both flags as given.
fn lengths(
    general: (&'static str, &'static str, &[u32], Option<u32>),
    random: (&'static str, &'static str, &[u32]),
) -> Result<Lengths, GridError> {
    let (gkey, gflag, glist, gvalue) = general;
    let (rkey, rflag, rlist) = random;
    if rlist.len() > 1 && gvalue.is_some() {
        return err(format!("{gflag} overrides {rflag}: give the list to one of them"));
    }
    if !glist.is_empty() {
        return Ok(Lengths { key: gkey, values: glist.iter().map(|&v| Some(v)).collect() });
    }
    if !rlist.is_empty() {
        return Ok(Lengths { key: rkey, values: rlist.iter().map(|&v| Some(v)).collect() });
    }
    Ok(Lengths { key: rkey, values: vec![None] })
}

/// Characters safe in a file name; others become `_`.
fn file_safe(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') { c } else { '_' }).collect()
}

/// The part of a result file name that tells a run of the sweep from the others: the varying
/// settings, short (`Qwen3-8B-c8-n80`), then the repeat or probe.
pub fn file_suffix(labels: &[(String, String)], target_index: usize) -> String {
    let parts: Vec<String> = labels
        .iter()
        .map(|(k, v)| {
            match k.as_str() {
                "model" => v.rsplit('/').next().unwrap_or(v).to_string(),
                "hardware" => v.clone(),
                "base_url" => format!("s{}", target_index + 1),
                "input_len" | "random_input_len" => format!("in{v}"),
                "output_len" | "random_output_len" => format!("out{v}"),
                "random_batch_size" => format!("b{v}"),
                "request_rate" => format!("qps{v}"),
                "max_concurrency" => format!("c{v}"),
                "num_prompts" => format!("n{v}"),
                "repeat" => format!("r{v}"),
                "probe" => format!("probe{v}"),
                // A serving option of the simulator's (`tp2`, `max-num-seqs64`).
                _ => format!("{k}{v}"),
            }
        })
        .collect();
    file_safe(&parts.join("-"))
}

/// Every point of `points` once for each of `values`, the value set by `set`: the earlier
/// axes stay outermost.
fn along<T: Copy>(
    points: Vec<Point>,
    values: impl Iterator<Item = T> + Clone,
    set: impl Fn(&mut Point, T),
) -> Vec<Point> {
    let set = &set;
    points
        .into_iter()
        .flat_map(|p| {
            values.clone().map(move |v| {
                let mut q = p.clone();
                set(&mut q, v);
                q
            })
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod tests;
