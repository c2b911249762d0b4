//! Any command line of `bench serve`'s, `sim predict`'s and `sweep`'s own flags, with values of
//! every kind (negative, huge, not finite, empty, of the wrong kind), is refused with an error or
//! resolved, never a panic: the flags are read as the program reads them (`prepare_argv`, then
//! clap), resolved into a run (the simulator's deployment included) and its requests built, or,
//! for a sweep, its grid made and every point resolved as it is before the first run.

use clap::{CommandFactory, Parser};
use proptest::prelude::*;

use super::Resolver;
use crate::cli::{BenchCommand, Cli, Command, SimCommand};
use crate::output::Sink;

/// The long flags of a subcommand, by its path from the root, but those that write files or
/// read a config file.
fn flags_of(path: &[&str]) -> Vec<String> {
    let mut command = Cli::command();
    command.build();
    let mut at = &command;
    for name in path {
        at = at.find_subcommand(name).expect("a subcommand");
    }
    let skip = ["help", "version", "config", "db", "save-result", "save-detailed", "result-dir", "dry-run"];
    at.get_arguments().filter_map(|a| a.get_long()).filter(|l| !skip.contains(l)).map(str::to_string).collect()
}

#[rustfmt::skip]
const VALUES: &[&str] = &[
    "0", "1", "-1", "2", "7", "8", "4096", "0.5", "-0.5", "0.1", "1e308", "nan", "inf", "-inf", "", " ", "abc", "1,2",
    "2k", "99999999999999999999", "{}", "{\"a\":1}", "[1]", "random", "sharegpt", "custom", "random-mm",
    "prefix_repetition", "linear", "exponential", "ttft:0", "ttft:50", "x=y", "a:b", "/nonexistent/file.jsonl",
    "openai-chat", "vllm", "openai-embeddings", "http://127.0.0.1:9", "Qwen/Qwen3-8B@h100-sxm", "tp=2", "ttft,tpot",
    "50,99", "0.8", "1:1", "true", "fp8", "h100-sxm", "dgx-spark", "openai/gpt-oss-120b", "model", "max-concurrency",
    "request-rate", "p99_ttft_ms<=500", "mean_tpot_ms<=50,p99_ttft_ms<=1e9", "rel:5%",
];

fn parses(argv: Vec<String>) -> Option<Cli> {
    Cli::try_parse_from(crate::cli::compat::prepare_argv(argv.into_iter().map(Into::into)).ok()?).ok()
}

/// A command line: `prefix`, then flags each given a value clap takes for it alone (or none,
/// for a switch), so that most lines reach the resolving they are drawn to test.
fn argv(prefix: &'static [&'static str], flags: Vec<String>) -> impl Strategy<Value = Vec<String>> {
    let word = (proptest::sample::select(flags), proptest::sample::select(VALUES), any::<bool>()).prop_map(
        |(flag, value, bare)| {
            if bare { vec![format!("--{flag}")] } else { vec![format!("--{flag}"), value.to_string()] }
        },
    );
    proptest::collection::vec(word, 0..8).prop_map(move |words| {
        let line = |words: &[String]| prefix.iter().map(|s| s.to_string()).chain(words.iter().cloned()).collect();
        let kept: Vec<String> = words.into_iter().filter(|w| parses(line(w)).is_some()).flatten().collect();
        line(&kept)
    })
}

/// The line resolved and its requests built (`Ok`), or why one of those refused it (`Err`);
/// `None` where clap refused the flags together. A panic fails the test.
fn resolve_and_plan(argv: Vec<String>) -> Option<Result<(), String>> {
    let cli = parses(argv)?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let out = Sink::memory();
    let resolved = runtime.block_on(async {
        match cli.command {
            Command::Bench(BenchCommand::Serve(args)) => {
                Resolver::default().resolve(&args.flags(false), &out).await.map(Some)
            }
            Command::Sim(SimCommand::Predict(args)) => Resolver::default().resolve(&args.flags(), &out).await.map(Some),
            Command::Sweep(args) => crate::commands::sweep::check(*args).map(|()| None),
            _ => unreachable!("only bench serve, sim predict and sweep are drawn"),
        }
    });
    // A sweep's check resolves its points; a run's requests are built.
    let planned = resolved.and_then(|r| r.map(|r| super::super::execute::plan(&r).map(drop)).transpose());
    Some(planned.map(drop).map_err(|e| format!("{e:#}")))
}

/// A line that is refused says why.
fn refused_with_a_reason(argv: Vec<String>) -> Result<(), TestCaseError> {
    if let Some(Err(why)) = resolve_and_plan(argv.clone()) {
        prop_assert!(why.trim().len() > 10, "{argv:?}: {why:?}");
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn bench_serve_flags_resolve_or_are_refused(
        argv in argv(&["servebench", "bench", "serve", "--base-url", "http://127.0.0.1:9", "--model", "m", "--num-prompts", "20"], flags_of(&["bench", "serve"])),
    ) {
        refused_with_a_reason(argv)?;
    }

    #[test]
    fn sim_predict_flags_resolve_or_are_refused(
        argv in argv(&["servebench", "sim", "predict", "--model", "Qwen/Qwen3-8B", "--hardware", "h100-sxm", "--num-prompts", "20"], flags_of(&["sim", "predict"])),
    ) {
        refused_with_a_reason(argv)?;
    }

    #[test]
    fn sweep_flags_resolve_or_are_refused(
        argv in argv(&["servebench", "sweep", "--sim", "Qwen/Qwen3-8B@h100-sxm", "--num-prompts", "20"], flags_of(&["sweep"])),
    ) {
        refused_with_a_reason(argv)?;
    }
}
