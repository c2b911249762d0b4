//! vLLM command-line compatibility: argument spelling and the flags we refuse.
//!
//! vLLM parses `vllm bench serve` with its `FlexibleArgumentParser`: `--foo_bar` means
//! `--foo-bar`, `--k=v` works, unambiguous prefixes are accepted (clap's `infer_long_args`
//! covers that), `--config FILE.yaml` reads flags from a file ([`super::config_file`]) and
//! `--json-flag.key value` gives one key of a JSON flag ([`super::dotted_args`]). Flags vLLM has
//! that servebench does not implement yet are refused here, before clap sees them, with an
//! error that names the flag and says what to do instead.

use std::ffi::OsString;

/// The help's note on the spellings [`prepare_argv`] reads, under the flags of the commands
/// that take vLLM's.
pub const SPELLINGS_HELP: &str = "Flags are also read as vLLM reads them: --num_prompts is --num-prompts, a prefix of \
     one flag names it, --config FILE.yaml takes flags from a YAML file (num-prompts: 200; the command line wins), and \
     --extra-body.top_k 5 gives a JSON flag one key at a time.";

/// A command line that cannot be read: a refused flag or a `--config` file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ArgvError {
    #[error(transparent)]
    Unsupported(#[from] UnsupportedFlag),
    #[error(transparent)]
    ConfigFile(#[from] super::config_file::ConfigFileError),
}

/// The command line as clap reads it, vLLM's spellings applied once: `--foo_bar`, a
/// `--config FILE.yaml` of flags, `--json-flag.key value`; then the flags servebench refuses.
pub fn prepare_argv(args: impl IntoIterator<Item = OsString>) -> Result<Vec<OsString>, ArgvError> {
    let args = super::config_file::expand_config(normalize_argv(args))?;
    let args = super::dotted_args::merge_dotted(args);
    refuse_unsupported(&args)?;
    Ok(args)
}

/// Rewrites `--foo_bar[=v]` to `--foo-bar[=v]`: underscores in the flag's name only, not in
/// its value nor in the keys of a `--json-flag.some_key`.
pub fn normalize_argv(args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    args.into_iter()
        .map(|a| match a.to_str() {
            Some(s) if s.starts_with("--") && s.len() > 2 => {
                let end = s.find(['=', '.']).unwrap_or(s.len());
                let (name, rest) = s.split_at(end);
                OsString::from(format!("--{}{rest}", name[2..].replace('_', "-")))
            }
            _ => a,
        })
        .collect()
}

/// vLLM flags servebench does not support yet, with a hint for each.
const UNSUPPORTED: &[(&str, &str)] = &[
    ("--skip-tokenizer-init", "leave out --tokenizer instead: token counts then come from the server's usage"),
    (
        "--no-self-timed",
        "servebench sends a trace's requests at their recorded times; to send prompts at a request rate, use \
         --dataset-name custom or random",
    ),
    ("--no-stream", "Hugging Face hub datasets are not supported (no network at run time); use a local file"),
    (
        "--enable-multimodal-chat",
        "leave it out: servebench puts a dataset's images in the chat message itself (random-mm, custom_image)",
    ),
    ("--custom-ensure-client-side-data", "not supported yet"),
    ("--hf-subset", "Hugging Face hub datasets are not supported; use --dataset-name custom with a local JSONL"),
    ("--hf-split", "Hugging Face hub datasets are not supported; use --dataset-name custom with a local JSONL"),
    ("--hf-name", "Hugging Face hub datasets are not supported; use --dataset-name custom with a local JSONL"),
    ("--hf-output-len", "Hugging Face hub datasets are not supported; use --dataset-name custom with a local JSONL"),
    ("--sonnet-input-len", "the sonnet dataset was removed from vLLM; use --dataset-name random"),
    ("--sonnet-output-len", "the sonnet dataset was removed from vLLM; use --dataset-name random"),
    ("--sonnet-prefix-len", "the sonnet dataset was removed from vLLM; use --dataset-name random"),
    ("--blazedit-min-distance", "the blazedit dataset is not supported yet"),
    ("--blazedit-max-distance", "the blazedit dataset is not supported yet"),
    ("--asr-max-audio-len-sec", "audio benchmarks are not supported yet"),
    ("--asr-min-audio-len-sec", "audio benchmarks are not supported yet"),
];

/// vLLM flags that `bench serve` and `sweep` take but the simulator's own commands do not.
const NOT_FOR_SIM: &[(&str, &str)] = &[
    ("--lora-modules", "the simulator serves no LoRA adapters; benchmark a real server with `bench serve`"),
    ("--lora-assignment", "the simulator serves no LoRA adapters; benchmark a real server with `bench serve`"),
];

/// `vllm bench serve`'s flags for reaching a server, which `sim predict` (a run in virtual
/// time) has no use for: refused with what to do, not taken and ignored, so that no one reads
/// a prediction as a measurement of the server they named.
const NOT_FOR_PREDICT: &[(&str, &str)] = &[
    ("--base-url", PREDICT_REACHES_NO_SERVER),
    ("--host", PREDICT_REACHES_NO_SERVER),
    ("--port", PREDICT_REACHES_NO_SERVER),
    ("--header", PREDICT_REACHES_NO_SERVER),
    ("--insecure", PREDICT_REACHES_NO_SERVER),
    ("--request-id-prefix", PREDICT_REACHES_NO_SERVER),
    ("--max-failures", super::resolve::STOP_RULES_NOT_PREDICTED),
    ("--stall-timeout", super::resolve::STOP_RULES_NOT_PREDICTED),
    (
        "--dry-run",
        "a prediction sends nothing, so there is nothing to hold back; to keep its requests, write them with \
         `bench serve --dry-run FILE` and the same workload flags, then predict that plan with \
         `sim predict --replay-plan FILE`",
    ),
];

/// servebench's own flags among those refused (the rest are vLLM's).
const OWN_FLAGS: &[&str] = &["--max-failures", "--stall-timeout", "--dry-run"];

const PREDICT_REACHES_NO_SERVER: &str = "it predicts in virtual time and reaches no server, so leave the server's \
     address and headers out (`bench serve` measures a server; `bench serve --sim MODEL@HARDWARE` serves the \
     simulator on a port)";

/// Error for a vLLM flag servebench refuses (or one of its own a command does not take).
#[derive(Debug, thiserror::Error)]
#[error("the {}flag {flag} is not supported by servebench{where_}: {hint}", if OWN_FLAGS.contains(&.flag.as_str()) { "" } else { "vLLM " })]
pub struct UnsupportedFlag {
    pub flag: String,
    pub hint: &'static str,
    /// Where it is refused: " yet" for every command, or a command that does not take it.
    pub where_: &'static str,
}

/// Subcommands that take `vllm bench serve`'s flags. (`sim` has a `--profile PROFILE` of its
/// own, a file of fitted constants; `bench serve` and `sweep` take vLLM's boolean `--profile`.)
const TAKES_VLLM_FLAGS: &[&str] = &["bench", "sweep", "sim"];

/// Whether servebench refuses this flag in some command (`--hf-split`, `--host` in `sim
/// predict`): a `--config` file passes such a key on, to be refused with its reason.
pub fn is_refused(flag: &str) -> bool {
    [UNSUPPORTED, NOT_FOR_SIM, NOT_FOR_PREDICT].iter().any(|list| list.iter().any(|(f, _)| *f == flag))
}

/// Refuses any vLLM flag we do not implement (after [`normalize_argv`]), in the subcommands
/// that take vLLM's flags.
pub fn refuse_unsupported(args: &[OsString]) -> Result<(), UnsupportedFlag> {
    let command = args.iter().skip(1).filter_map(|a| a.to_str()).find(|a| !a.starts_with('-'));
    if !command.is_some_and(|c| TAKES_VLLM_FLAGS.contains(&c)) {
        return Ok(());
    }
    // `sim predict`: the word after `sim` (no flag of `sim` itself comes before it).
    let predict = command == Some("sim")
        && args.iter().filter_map(|a| a.to_str()).skip_while(|a| *a != "sim").nth(1) == Some("predict");
    for a in args {
        let Some(s) = a.to_str() else { continue };
        if s == "--" {
            break;
        }
        let name = s.split('=').next().unwrap_or(s);
        if let Some((flag, hint)) = UNSUPPORTED.iter().find(|(f, _)| *f == name) {
            return Err(UnsupportedFlag { flag: (*flag).to_string(), hint, where_: " yet" });
        }
        if command == Some("sim")
            && let Some((flag, hint)) = NOT_FOR_SIM.iter().find(|(f, _)| *f == name)
        {
            return Err(UnsupportedFlag { flag: (*flag).to_string(), hint, where_: "'s simulator commands" });
        }
        if predict && let Some((flag, hint)) = NOT_FOR_PREDICT.iter().find(|(f, _)| *f == name) {
            return Err(UnsupportedFlag { flag: (*flag).to_string(), hint, where_: " in sim predict" });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn a_flag_given_twice_takes_its_last_value_as_in_vllm_and_collecting_flags_collect() {
        use clap::Parser;
        let argv = os(&[
            "servebench",
            "bench",
            "serve",
            "--num-prompts",
            "5",
            "--header",
            "a=1",
            "--num_prompts=6",
            "--header",
            "b=2",
            "--disable-tqdm",
            "--disable-tqdm",
        ]);
        let cli = crate::cli::Cli::try_parse_from(prepare_argv(argv).unwrap()).unwrap();
        let crate::cli::Command::Bench(crate::cli::BenchCommand::Serve(args)) = cli.command else { panic!() };
        assert_eq!(args.traffic.num_prompts, 6);
        assert_eq!(args.endpoint.header, ["a=1", "b=2"]);
        assert!(args.traffic.disable_tqdm);
    }

    #[test]
    fn underscores_in_flag_names_become_dashes_but_values_are_kept() {
        let got = normalize_argv(os(&["servebench", "--num_prompts", "10", "--result_filename=a_b.json", "x_y"]));
        assert_eq!(got, os(&["servebench", "--num-prompts", "10", "--result-filename=a_b.json", "x_y"]));
        // A JSON flag's keys keep their underscores.
        let got = normalize_argv(os(&["--extra_body.chat_template_kwargs.enable_thinking=false"]));
        assert_eq!(got, os(&["--extra-body.chat_template_kwargs.enable_thinking=false"]));
    }

    #[test]
    fn unsupported_flags_are_named_in_the_error() {
        let err = refuse_unsupported(&os(&["servebench", "bench", "serve", "--no-self-timed"])).unwrap_err();
        assert_eq!(err.flag, "--no-self-timed");
        assert!(err.to_string().contains("--no-self-timed"), "{err}");
        let err = refuse_unsupported(&os(&["servebench", "sweep", "--hf-split=train"])).unwrap_err();
        assert_eq!(err.flag, "--hf-split");
        let ok = os(&["servebench", "bench", "serve", "--num-prompts", "5", "--metadata", "self-timed=1"]);
        assert!(refuse_unsupported(&ok).is_ok());
    }

    #[test]
    fn insecure_and_profile_are_accepted_and_sim_keeps_its_own_profile_flag() {
        for command in [&["bench", "serve"][..], &["sweep"]] {
            for flag in ["--insecure", "--profile"] {
                let argv: Vec<&str> = ["servebench"].iter().chain(command).chain(&[flag]).copied().collect();
                assert!(refuse_unsupported(&os(&argv)).is_ok(), "{argv:?}");
            }
        }
        let predict = os(&["servebench", "sim", "predict", "--model", "m", "--profile", "p.toml"]);
        assert!(refuse_unsupported(&predict).is_ok());
        let err = refuse_unsupported(&os(&["servebench", "sim", "predict", "--lora-modules", "a"])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "the vLLM flag --lora-modules is not supported by servebench's simulator commands: the simulator serves no LoRA adapters; benchmark a real server with `bench serve`"
        );
        assert!(refuse_unsupported(&os(&["servebench", "bench", "serve", "--lora-modules", "a"])).is_ok());
        assert!(refuse_unsupported(&os(&["servebench", "runs", "list", "--hf-split"])).is_ok());
    }

    #[test]
    fn sim_predict_refuses_a_server_s_address_with_what_to_do_and_sim_serve_takes_its_own() {
        for flag in ["--host=localhost", "--port", "--base-url", "--header", "--insecure", "--request-id-prefix"] {
            let err =
                refuse_unsupported(&os(&["servebench", "sim", "predict", "--model", "m", flag, "x"])).unwrap_err();
            assert_eq!(err.flag, flag.split('=').next().unwrap());
            let msg = err.to_string();
            assert!(
                msg.contains("in sim predict") && msg.contains("reaches no server") && msg.contains("--sim"),
                "{msg}"
            );
        }
        // `sim serve` listens on --host and --port; `bench serve` sends to them.
        assert!(refuse_unsupported(&os(&["servebench", "sim", "serve", "--host", "0.0.0.0", "--port", "9"])).is_ok());
        assert!(
            refuse_unsupported(&os(&["servebench", "bench", "serve", "--base-url", "http://a", "--header", "k=v"]))
                .is_ok()
        );
        // Its requests are written by `bench serve --dry-run`, servebench's own flag.
        let err = refuse_unsupported(&os(&["servebench", "sim", "predict", "--dry-run", "p.jsonl"])).unwrap_err();
        let msg = err.to_string();
        assert!(msg.starts_with("the flag --dry-run is not supported by servebench in sim predict"), "{msg}");
        assert!(msg.contains("`bench serve --dry-run FILE`") && msg.contains("--replay-plan FILE"), "{msg}");
        assert!(refuse_unsupported(&os(&["servebench", "bench", "serve", "--dry-run", "p.jsonl"])).is_ok());
        // A model named `predict` elsewhere is not the subcommand.
        assert!(refuse_unsupported(&os(&["servebench", "sim", "step", "--model", "predict", "--host"])).is_ok());
    }
}
