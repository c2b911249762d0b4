//! `servebench sweep` flags: every `bench serve` flag, where the load, the lengths and the
//! target may be comma lists that form a grid, plus the sweep's own flags.
//!
//! The list flags keep their `bench serve` names and fields: each accepts `A,B,C` (and may be
//! repeated), the parsed [`BenchServeArgs`] hold the first value, and [`GridLists`] all of them
//! (read from the raw command line, so nothing is parsed twice in different ways).

use clap::builder::ValueParser;
use clap::parser::ValueSource;
use clap::{Arg, ArgAction, ArgMatches, Args, Command, FromArgMatches, ValueEnum};

use super::BenchServeArgs;

/// Splits a comma list, trimming items (an empty item stays, for the flag's parser to refuse).
pub fn split_list(s: &str) -> Vec<&str> {
    s.split(',').map(str::trim).collect()
}

/// A parser for a comma list of `T` that yields the first item: the field `bench serve`
/// declares keeps its type, and every item is checked here.
fn list_of<T>(flag: &'static str) -> ValueParser
where
    T: std::str::FromStr + Clone + Send + Sync + 'static,
{
    ValueParser::new(move |s: &str| -> Result<T, String> {
        let items = split_list(s);
        let mut first = None;
        for item in &items {
            if item.is_empty() {
                return Err(format!(
                    "{flag} {s:?} has an empty item: write the values with one comma between each, e.g. 1,4,16"
                ));
            }
            let v = item.parse::<T>().map_err(|_| format!("{item:?} is not a valid value of {flag}"))?;
            first.get_or_insert(v);
        }
        first.ok_or_else(|| format!("{flag} needs at least one value"))
    })
}

/// One list flag: its argument id (the field name), its flag and help.
struct ListFlag {
    id: &'static str,
    parser: fn() -> ValueParser,
    help: &'static str,
}

const LIST_FLAGS: [ListFlag; 11] = [
    ListFlag {
        id: "num_prompts",
        parser: || list_of::<usize>("--num-prompts"),
        help: "Requests per run; a comma list sweeps it (1,2,4,8)",
    },
    ListFlag {
        id: "max_concurrency",
        parser: || list_of::<i64>("--max-concurrency"),
        help: "At most this many requests in flight; a comma list sweeps it (1,4,16,64)",
    },
    ListFlag {
        id: "request_rate",
        parser: || list_of::<f64>("--request-rate"),
        help: "Requests per second (inf: all at once); a comma list sweeps it (2,4,8,inf)",
    },
    ListFlag {
        id: "random_input_len",
        parser: || list_of::<u32>("--random-input-len"),
        help: "Prompt tokens of the random dataset; a comma list sweeps it",
    },
    ListFlag {
        id: "random_output_len",
        parser: || list_of::<u32>("--random-output-len"),
        help: "Output tokens of the random dataset; a comma list sweeps it",
    },
    ListFlag {
        id: "random_batch_size",
        parser: || list_of::<u32>("--random-batch-size"),
        help: "Prompts one pooling request carries (random and random-rerank datasets); a comma list sweeps it (1,8,32)",
    },
    ListFlag {
        id: "input_len",
        parser: || list_of::<u32>("--input-len"),
        help: "General input length (maps to --random-input-len); a comma list sweeps it",
    },
    ListFlag {
        id: "output_len",
        parser: || list_of::<u32>("--output-len"),
        help: "General output length (every dataset's); a comma list sweeps it",
    },
    ListFlag {
        id: "sim",
        parser: || list_of::<String>("--sim"),
        help: "Simulated targets, MODEL@HARDWARE; a comma list sweeps them \
               (Qwen/Qwen3-8B@h100-sxm,Qwen/Qwen3-4B@h100-sxm)",
    },
    ListFlag {
        id: "base_url",
        parser: || list_of::<String>("--base-url"),
        help: "Server base URLs; a comma list sweeps the servers (with one --model, or one per URL, or none to ask each)",
    },
    ListFlag {
        id: "model",
        parser: || list_of::<String>("--model"),
        help: "Model name; a comma list gives one per --base-url, or several models of one server \
               [default: fetched from each server]",
    },
];

/// The values of the list flags given on the command line; empty when a flag was not given.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GridLists {
    pub num_prompts: Vec<usize>,
    pub max_concurrency: Vec<i64>,
    pub request_rate: Vec<f64>,
    pub random_input_len: Vec<u32>,
    pub random_output_len: Vec<u32>,
    pub random_batch_size: Vec<u32>,
    pub input_len: Vec<u32>,
    pub output_len: Vec<u32>,
    pub sim: Vec<String>,
    pub base_url: Vec<String>,
    pub model: Vec<String>,
}

impl GridLists {
    fn read(m: &ArgMatches) -> Result<GridLists, clap::Error> {
        Ok(GridLists {
            num_prompts: once(values(m, "num_prompts")?, "--num-prompts")?,
            max_concurrency: once(values(m, "max_concurrency")?, "--max-concurrency")?,
            request_rate: once(values(m, "request_rate")?, "--request-rate")?,
            random_input_len: once(values(m, "random_input_len")?, "--random-input-len")?,
            random_output_len: once(values(m, "random_output_len")?, "--random-output-len")?,
            random_batch_size: once(values(m, "random_batch_size")?, "--random-batch-size")?,
            input_len: once(values(m, "input_len")?, "--input-len")?,
            output_len: once(values(m, "output_len")?, "--output-len")?,
            sim: once(values(m, "sim")?, "--sim")?,
            base_url: values(m, "base_url")?,
            model: values(m, "model")?,
        })
    }
}

/// Every item of every occurrence of list flag `id` on the command line.
fn values<T: std::str::FromStr>(m: &ArgMatches, id: &str) -> Result<Vec<T>, clap::Error> {
    if m.value_source(id) != Some(ValueSource::CommandLine) {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for raw in m.get_raw(id).into_iter().flatten() {
        for item in split_list(&raw.to_string_lossy()) {
            // Checked by the flag's parser already.
            let v = item.parse::<T>().map_err(|_| {
                clap::Error::raw(clap::error::ErrorKind::ValueValidation, format!("invalid value {item:?} for {id}\n"))
            })?;
            out.push(v);
        }
    }
    Ok(out)
}

/// A grid list whose values are all different: a value given twice would run its points twice
/// under one name, which `--repeats` does openly. (`--model` and `--base-url` may repeat: one
/// model on two servers, two models of one server.)
fn once<T: PartialEq + std::fmt::Display>(list: Vec<T>, flag: &str) -> Result<Vec<T>, clap::Error> {
    if let Some(twice) = list.iter().enumerate().find_map(|(i, v)| list[..i].contains(v).then_some(v)) {
        let msg = format!(
            "{flag} gives {twice} twice; give each value once, and run every point several times with --repeats N"
        );
        return Err(clap::Error::raw(clap::error::ErrorKind::ValueValidation, msg));
    }
    Ok(list)
}

/// What an SLO search raises.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum SearchKey {
    /// The highest --max-concurrency (whole numbers) meeting every SLO.
    MaxConcurrency,
    /// The highest --request-rate meeting every SLO.
    RequestRate,
}

impl SearchKey {
    /// The setting's name in labels and tables.
    pub fn key(self) -> &'static str {
        match self {
            SearchKey::MaxConcurrency => "max_concurrency",
            SearchKey::RequestRate => "request_rate",
        }
    }

    pub fn flag(self) -> &'static str {
        match self {
            SearchKey::MaxConcurrency => "--max-concurrency",
            SearchKey::RequestRate => "--request-rate",
        }
    }
}

/// The sweep's own flags.
#[derive(Args, Clone, Debug, Default)]
#[command(next_help_heading = "Sweep")]
pub struct SweepOptions {
    /// Run every point N times; the table at the end shows each point's mean ± standard
    /// deviation across them.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub repeats: u32,
    /// num_prompts = K × max_concurrency at each point (K × request rate, rounded up, without
    /// --max-concurrency), so runs stay comparable across the load.
    #[arg(long, value_name = "K", conflicts_with = "num_prompts")]
    pub scale_num_prompts: Option<f64>,
    /// Pair the input and output length lists item by item instead of crossing them:
    /// `--random-input-len 8191,1 --random-output-len 1,128` runs a prefill point and a decode
    /// point, not four. The two lists need as many values.
    #[arg(long)]
    pub zip_lengths: bool,
    /// Predict --sim points in virtual time (like `sim predict`) instead of serving them over
    /// HTTP in real time: a large grid finishes in seconds.
    #[arg(long)]
    pub predict: bool,
    /// Set by `--workers` for its worker processes: the one run (point and repeat) to send.
    #[arg(long, hide = true, env = "SERVEBENCH_SWEEP_RUN")]
    pub worker_run: Option<String>,
    /// The sweep's name, the value of the sweep=NAME label of its runs [default: its start time
    /// and a random suffix].
    #[arg(long, value_name = "NAME")]
    pub sweep_id: Option<String>,
    /// The axis of the table at the end (as `compare --by`).
    #[arg(long, value_name = "KEY")]
    pub by: Option<String>,
    /// Print findings under the table at the end.
    #[arg(long)]
    pub findings: bool,
    /// Service level objectives, comma-separated: KEY<=VALUE for latencies (ms) and failed_pct,
    /// KEY>=VALUE for throughputs. Keys: {mean,median,p99,pN}_{ttft,tpot,itl,e2el}_ms,
    /// failed_pct, output_throughput, request_throughput, total_token_throughput,
    /// input_sequence_throughput (pooling runs). Without --search every point is checked
    /// against them.
    #[arg(long, value_name = "SLOS")]
    pub slo: Vec<String>,
    /// Find the highest max-concurrency or request-rate meeting every --slo: doubling from
    /// --search-min until a probe fails, then bisection.
    #[arg(long, value_enum, value_name = "KEY", requires = "slo")]
    pub search: Option<SearchKey>,
    /// The first probe [default: 1].
    #[arg(long, value_name = "X", requires = "search")]
    pub search_min: Option<f64>,
    /// No probe above this [default: 4096 for max-concurrency, 1024 for request-rate].
    #[arg(long, value_name = "X", requires = "search")]
    pub search_max: Option<f64>,
    /// Stop bisecting when the passing and failing probes are this close: a number in the
    /// setting's unit, or a percentage of the passing value (5%) [default: 1 for
    /// max-concurrency, 5% for request-rate].
    #[arg(long, value_name = "T", requires = "search")]
    pub search_tolerance: Option<String>,
    /// A load to serve, in the searched setting's unit (requests a second for request-rate,
    /// concurrent requests for max-concurrency): after the search, how many replicas of each
    /// deployment, how many GPUs and at what price an hour serve it under the SLOs.
    #[arg(long, value_name = "LOAD", requires = "search")]
    pub demand: Option<f64>,
}

/// `servebench sweep`: `bench serve`'s flags with lists, and the sweep's own.
#[derive(Clone, Debug, Default)]
pub struct SweepArgs {
    /// Every `bench serve` flag; a list flag holds its first value.
    pub bench: BenchServeArgs,
    /// All the values of the list flags.
    pub lists: GridLists,
    pub sweep: SweepOptions,
}

impl FromArgMatches for SweepArgs {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        Self::from_arg_matches_mut(&mut m.clone())
    }

    fn from_arg_matches_mut(m: &mut ArgMatches) -> Result<Self, clap::Error> {
        let lists = GridLists::read(m)?;
        let bench = BenchServeArgs::from_arg_matches_mut(m)?;
        let sweep = SweepOptions::from_arg_matches_mut(m)?;
        Ok(SweepArgs { bench, lists, sweep })
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

impl Args for SweepArgs {
    fn augment_args(cmd: Command) -> Command {
        let cmd = LIST_FLAGS.iter().fold(BenchServeArgs::augment_args(cmd), |cmd, f| {
            cmd.mut_arg(f.id, |a: Arg| a.value_parser((f.parser)()).action(ArgAction::Append).help(f.help))
        });
        SweepOptions::augment_args(cmd).after_long_help(format!("{SWEEP_HELP}\n\n{}", super::compat::SPELLINGS_HELP))
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

const SWEEP_HELP: &str = "\
The grid is every combination of the list flags' values: targets (--sim or --base-url, with \
--model), then --input-len/--random-input-len, --output-len/--random-output-len, \
--random-batch-size (pooling runs), --request-rate, --max-concurrency and --num-prompts; each point runs --repeats times. A --sim target's serving \
options given several values are a deployment each: --sim-option tp=1,2,8 (an option whose one \
value holds commas, such as cudagraph-capture-sizes, by giving it again). Every run is a full \
`bench serve` run: printed under a heading (`Results MODEL`, `max_concurrency: 8`), saved with \
--save-result (one file per run), and kept in the run store labelled with what varies \
(model=, max_concurrency=, ...), sweep=NAME and repeat=I. A point that fails is recorded and the \
sweep goes on; Ctrl-C stops it after keeping what was measured. At the end the runs are \
compared as `servebench compare --label sweep=NAME` would.

SLO search: --search max-concurrency --slo p99_ttft_ms<=500,p99_tpot_ms<=50 probes 1, 2, 4, ... \
until a probe fails (or --search-max), then bisects between the highest pass and the lowest \
fail. Each probe is a full run labelled search=NAME and probe=I; with --repeats a probe is \
judged on the mean of its runs. Noise moves the answer: repeat to see how far. Where the runs \
know their GPUs, the answers of several deployments are compared per GPU; --demand LOAD plans the \
replicas, GPUs and price an hour of each that serve LOAD, the load split evenly.

Exit codes: 0 done, 1 error or a point failed (or every request of one did), 2 bad usage, 130 \
interrupted.";
