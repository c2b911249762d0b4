use std::ffi::OsString;

use clap::Parser;

use super::*;
use crate::cli::compat::{ArgvError, prepare_argv};
use crate::cli::{BenchCommand, Cli, Command};

/// A config file in its own folder, named `name`.
fn file(name: &str, yaml: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, yaml).unwrap();
    (dir, path.to_str().unwrap().to_string())
}

fn expand(args: &[&str]) -> Result<Vec<String>, ConfigFileError> {
    let args: Vec<OsString> = args.iter().map(OsString::from).collect();
    Ok(expand_config(args)?.into_iter().map(|a| a.into_string().unwrap()).collect())
}

const BENCH: &str = "\
num-prompts: 100
request-rate: .inf
random_input_len: 64
max-concurrency: 4
disable-tqdm: true
save-result: false
header: [a=1, b=2]
extra-body: {temperature: 0.5, chat_template_kwargs: {enable_thinking: false}}
percentile-metrics: [ttft, tpot]
metric-percentiles: 50,99
";

#[test]
fn the_file_s_flags_follow_the_subcommand_and_the_command_line_wins() {
    let (_dir, path) = file("bench.yaml", BENCH);
    let got = expand(&["servebench", "bench", "serve", "--config", &path, "--num-prompts", "5"]).unwrap();
    let want = [
        "servebench",
        "bench",
        "serve",
        "--request-rate",
        "inf",
        "--random-input-len",
        "64",
        "--max-concurrency",
        "4",
        "--disable-tqdm",
        "--header",
        "a=1",
        "b=2",
        "--extra-body",
        r#"{"temperature":0.5,"chat_template_kwargs":{"enable_thinking":false}}"#,
        "--percentile-metrics",
        "ttft,tpot",
        "--metric-percentiles",
        "50,99",
        "--num-prompts",
        "5",
    ];
    assert_eq!(got, want);
    let Command::Bench(BenchCommand::Serve(args)) = Cli::try_parse_from(&got).unwrap().command else { panic!() };
    assert_eq!((args.traffic.num_prompts, args.traffic.max_concurrency), (5, Some(4)));
    assert_eq!(args.endpoint.header, ["a=1", "b=2"]);
    assert_eq!((args.dataset.random_input_len, args.traffic.request_rate), (64, f64::INFINITY));
    assert!(args.traffic.disable_tqdm && !args.report.save_result);
}

#[test]
fn a_flag_the_command_line_gives_replaces_the_file_s_whole() {
    let (_dir, path) = file("bench.yml", BENCH);
    // The command line's headers replace the file's (they are not added to them), and a
    // prefix or an underscore spelling names the same flag.
    let got = expand(&["servebench", "bench", "serve", "--header", "c=3", "--config", &path, "--num-p", "7"]).unwrap();
    assert!(!got.contains(&"a=1".to_string()) && !got.contains(&"100".to_string()), "{got:?}");
    let Command::Bench(BenchCommand::Serve(args)) = Cli::try_parse_from(&got).unwrap().command else { panic!() };
    assert_eq!((args.endpoint.header.as_slice(), args.traffic.num_prompts), (&["c=3".to_string()][..], 7));
    // `--config=FILE`, and what follows `--` is not read.
    let got = expand(&["servebench", "bench", "serve", &format!("--config={path}"), "--", "--config", "x"]).unwrap();
    assert_eq!(got[3..5], ["--num-prompts", "100"]);
    assert_eq!(got[got.len() - 3..], ["--", "--config", "x"]);
}

#[test]
fn switches_take_their_no_form_and_keys_may_be_dotted() {
    let yaml = "enable-prefix-caching: false\nno-store: true\nnum_prompts: 3\nprecision: fp8\noption: [a=1, b=2]\n";
    let (_dir, path) = file("sim.yaml", yaml);
    let got = expand(&["servebench", "sim", "predict", "--config", &path, "--model", "m"]).unwrap();
    let want = ["servebench", "sim", "predict", "--no-enable-prefix-caching", "--no-store", "--num-prompts", "3"];
    assert_eq!(got[..7], want);
    // A flag given once a value is given once an item.
    let want = ["--precision", "fp8", "--option", "a=1", "--option", "b=2", "--model", "m"];
    assert_eq!(got[7..], want);
    // So is a sweep's list flag; one that takes a value list gets the items joined.
    let (_dir, path) = file("sweep.yaml", "max-concurrency: [1, 4]\npercentile-metrics: [ttft, tpot]\n");
    let got = expand(&["servebench", "sweep", "--config", &path]).unwrap();
    let want = ["--max-concurrency", "1", "--max-concurrency", "4", "--percentile-metrics", "ttft,tpot"];
    assert_eq!(got[2..], want);
    // `true` for a switch servebench has only the `--no-` form of is the default: nothing.
    let (_dir, path) = file("on.yaml", "enable-prefix-caching: true\n");
    assert_eq!(expand(&["servebench", "sim", "predict", "--config", &path]).unwrap(), ["servebench", "sim", "predict"]);
    // A dotted key passes on for `--json-flag.key` to read; an empty file gives no flags.
    let (_dir, path) = file("dotted.yaml", "extra_body.top_k: 5\n");
    let got = expand(&["servebench", "bench", "serve", "--config", &path]).unwrap();
    assert_eq!(got[3..], ["--extra-body.top_k", "5"]);
    let (_dir, path) = file("empty.yaml", "# nothing\n");
    assert_eq!(expand(&["servebench", "bench", "serve", "--config", &path]).unwrap().len(), 3);
}

#[test]
fn the_file_and_dotted_keys_reach_the_parsed_flags_together() {
    let (_dir, path) = file("b.yaml", "extra-body: {top_k: 5}\nextra_body.temperature: 0\n");
    let args = ["servebench", "bench", "serve", "--config", &path, "--extra-body.top_p", "0.9"];
    let got = prepare_argv(args.iter().map(OsString::from)).unwrap();
    let Command::Bench(BenchCommand::Serve(args)) = Cli::try_parse_from(&got).unwrap().command else { panic!() };
    let body: serde_json::Value = serde_json::from_str(args.content.extra_body.as_deref().unwrap()).unwrap();
    assert_eq!(body, serde_json::json!({"top_k": 5, "temperature": 0, "top_p": 0.9}));
}

#[test]
fn anchors_and_merge_keys_read_as_vllm_s_yaml_loader_reads_them() {
    let yaml = "\
num-warmups: &two 2
seed: *two
<<: [{num-prompts: 7, seed: 3}]
extra-body: {temperature: 0, top_k: 5}
";
    let (_dir, path) = file("merge.yaml", yaml);
    let got = prepare_argv(["servebench", "bench", "serve", "--config", &path].map(OsString::from)).unwrap();
    let Command::Bench(BenchCommand::Serve(args)) = Cli::try_parse_from(&got).unwrap().command else { panic!() };
    // An alias is its anchor's value; a merged key gives way to the mapping's own.
    assert_eq!((args.traffic.num_prompts, args.traffic.seed, args.traffic.num_warmups), (7, 2, 2));
    let body: serde_json::Value = serde_json::from_str(args.content.extra_body.as_deref().unwrap()).unwrap();
    assert_eq!(body, serde_json::json!({"temperature": 0, "top_k": 5}));
    // A merge of something other than a mapping is not YAML a loader takes.
    let (_dir, path) = file("bad-merge.yaml", "<<: 5\n");
    let err = expand(&["servebench", "bench", "serve", "--config", &path]).unwrap_err().to_string();
    assert!(err.starts_with(&format!("--config {path}: not valid YAML")), "{err}");
}

#[test]
fn a_refused_flag_in_the_file_is_refused_with_its_reason() {
    let (_dir, path) = file("hf.yaml", "hf-split: train\n");
    let args = ["servebench", "bench", "serve", "--config", &path];
    let err = prepare_argv(args.iter().map(OsString::from)).unwrap_err();
    assert!(matches!(&err, ArgvError::Unsupported(e) if e.flag == "--hf-split"), "{err}");
    let (_dir, path) = file("host.yaml", "host: localhost\n");
    let err = prepare_argv(["servebench", "sim", "predict", "--config", &path].map(OsString::from)).unwrap_err();
    assert!(err.to_string().contains("reaches no server"), "{err}");
}

#[test]
fn a_file_that_cannot_be_used_is_named_with_what_to_do() {
    let cases: [(&str, &str, &str); 9] = [
        (
            "a.yaml",
            "num-prompt: 5\n",
            "`num-prompt` is not a flag of `servebench bench serve`; did you mean `num-prompts`?",
        ),
        ("b.yaml", "zzz: 1\n", "`zzz` is not a flag of `servebench bench serve`"),
        ("c.yaml", "num-prompts:\n", "`num-prompts` has no value; give it one or remove the line"),
        ("d.yaml", "- num-prompts\n", "must map flag names to values (`num-prompts: 100`), not hold a list"),
        ("e.yaml", "num-prompts: [\n", "not valid YAML"),
        ("f.json", "{}", "a config file is YAML, named .yaml or .yml"),
        ("g.yaml", "1: 2\n", "the key 1 is not a flag name"),
        ("h.yaml", "header: [a=1, ~]\n", "`header` has no value; give it one or remove the line"),
        ("i.yaml", "disable-tqdm: 1\n", "`disable-tqdm` is a switch; give it true or false"),
    ];
    for (name, yaml, want) in cases {
        let (_dir, path) = file(name, yaml);
        let err = expand(&["servebench", "bench", "serve", "--config", &path]).unwrap_err().to_string();
        assert!(err.starts_with(&format!("--config {path}: ")) && err.contains(want), "{name}: {err}");
    }
    let err = expand(&["servebench", "bench", "serve", "--config", "/nonexistent/x.yaml"]).unwrap_err();
    assert!(err.to_string().starts_with("--config /nonexistent/x.yaml: cannot read it"), "{err}");
    let err = expand(&["servebench", "bench", "serve", "--config"]).unwrap_err();
    assert_eq!(err.to_string(), "--config needs a file: --config FILE.yaml");
    let err = expand(&["servebench", "bench", "serve", "--config", "--num-prompts", "1"]).unwrap_err();
    assert!(matches!(err, ConfigFileError::Missing));
    let err = expand(&["servebench", "bench", "serve", "--config", "a.yaml", "--config=b.yaml"]).unwrap_err();
    assert!(err.to_string().starts_with("--config is given 2 times"), "{err}");
}

#[test]
fn without_config_the_words_come_back_as_they_were() {
    let args = ["servebench", "bench", "serve", "--num-prompts", "5", "--", "--config"];
    assert_eq!(expand(&args).unwrap(), args);
}

#[test]
fn a_value_the_flag_refuses_is_named_with_the_file() {
    let cases = [
        (
            "max-concurrency: [1, 4]\n",
            "`max-concurrency` is refused by its flag: invalid value '1,4' for '--max-concurrency <MAX_CONCURRENCY>': \
             invalid digit found in string; the flag takes one value, not a list (`servebench sweep` takes lists of \
             its grid's flags)",
        ),
        ("num-prompts: many\n", "`num-prompts` is refused by its flag: invalid value 'many' for '--num-prompts"),
        (
            "lora-assignment: round_robin\n",
            "`lora-assignment` is refused by its flag: invalid value 'round_robin' for '--lora-assignment \
             <LORA_ASSIGNMENT>'; [possible values: random, round-robin]; tip: a similar value exists: 'round-robin'",
        ),
    ];
    for (yaml, want) in cases {
        let (_dir, path) = file("v.yaml", yaml);
        let err = expand(&["servebench", "bench", "serve", "--config", &path]).unwrap_err().to_string();
        assert!(err.starts_with(&format!("--config {path}: ")) && err.contains(want), "{yaml}: {err}");
    }
    // A bad item of a list the flag takes is named without the word on lists; a sweep's list
    // flag checks each of its items.
    let (_dir, path) = file("s.yaml", "max-concurrency: [1, x]\nburstiness: [1, 2]\n");
    let err = expand(&["servebench", "sweep", "--config", &path]).unwrap_err().to_string();
    assert!(
        err.contains("`max-concurrency` is refused by its flag: invalid value 'x'") && !err.contains("list"),
        "{err}"
    );
    let (_dir, path) = file("b.yaml", "burstiness: [1, 2]\n");
    let err = expand(&["servebench", "sweep", "--config", &path]).unwrap_err().to_string();
    assert!(err.ends_with("invalid float literal; the flag takes one value, not a list"), "{err}");
}

#[test]
fn every_flag_of_every_command_can_be_checked_alone() {
    // clap's own checks of a command (run as it is built, in debug builds) pass for each flag
    // taken alone, so a config file's value never meets a panic where it meets its parser.
    fn walk(command: &clap::Command, seen: &mut usize) {
        for arg in command.get_arguments().filter(|a| a.get_long().is_some()) {
            let flag = format!("--{}", arg.get_long().unwrap());
            let _ = check_values(arg, std::slice::from_ref(&flag));
            *seen += 1;
        }
        command.get_subcommands().for_each(|sub| walk(sub, seen));
    }
    let mut root = Cli::command();
    root.build();
    let mut seen = 0;
    walk(&root, &mut seen);
    assert!(seen > 300, "{seen} flags");
}

mod properties {
    use proptest::prelude::*;

    use super::*;

    /// A key of a config file: mostly flags of the commands (of every kind: numbers, lists,
    /// switches, JSON, repeated), some not.
    fn key() -> impl Strategy<Value = String> {
        prop_oneof![
            proptest::sample::select(vec![
                "num-prompts",
                "max_concurrency",
                "request-rate",
                "header",
                "extra-body",
                "extra_body.a.b",
                "percentile-metrics",
                "disable-tqdm",
                "enable-prefix-caching",
                "option",
                "lora-assignment",
                "hf-split",
            ])
            .prop_map(str::to_string),
            "[a-z_.-]{0,12}",
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn any_file_is_read_or_refused_without_a_panic(
            lines in proptest::collection::vec((key(), "(\\PC{0,16}|\\[[0-9a-z,= ~]{0,12}\\]|\\{[a-z: 0-9,]{0,12}\\}|~|true|false|.inf)?"), 0..5),
        ) {
            let yaml: String = lines.iter().map(|(k, v)| format!("{k}: {v}\n")).collect();
            let (_dir, path) = file("any.yaml", &yaml);
            let _ = expand(&["servebench", "bench", "serve", "--config", &path]);
            let _ = expand(&["servebench", "sweep", "--config", &path]);
            let _ = expand(&["servebench", "sim", "predict", "--config", &path]);
        }

        #[test]
        fn the_file_s_numbers_reach_the_parsed_flags(
            prompts in 1usize..100_000,
            concurrency in 1i64..10_000,
            input in 0u32..1_000_000,
            seed: u64,
            underscores: bool,
        ) {
            let key = |k: &str| if underscores { k.replace('-', "_") } else { k.to_string() };
            let yaml = format!(
                "{}: {prompts}\n{}: {concurrency}\n{}: {input}\nseed: {seed}\n",
                key("num-prompts"),
                key("max-concurrency"),
                key("random-input-len"),
            );
            let (_dir, path) = file("n.yaml", &yaml);
            let got = expand(&["servebench", "bench", "serve", "--config", &path]).unwrap();
            let Command::Bench(BenchCommand::Serve(args)) = Cli::try_parse_from(&got).unwrap().command else {
                panic!()
            };
            prop_assert_eq!(args.traffic.num_prompts, prompts);
            prop_assert_eq!(args.traffic.max_concurrency, Some(concurrency));
            prop_assert_eq!(args.dataset.random_input_len, input);
            prop_assert_eq!(args.traffic.seed, seed);
        }
    }
}
