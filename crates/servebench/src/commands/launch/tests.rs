//! The Kubernetes manifest and sbatch script `launch` prints: parsed back, quoted safely, and
//! refused for flags that cannot shard.

use serde::Deserialize as _;
use serde_norway::Value;

use super::*;

fn common(args: &[&str]) -> LaunchCommon {
    LaunchCommon { workers: 4, port: 29500, sweep: false, args: args.iter().map(|s| s.to_string()).collect() }
}

fn k8s(args: &[&str]) -> K8sArgs {
    K8sArgs {
        common: common(args),
        image: "ghcr.io/example/servebench:0.1".into(),
        name: "bench-qwen".into(),
        namespace: Some("llm".into()),
        results_claim: "servebench-results".into(),
        results_dir: "/results".into(),
        cpu: "2".into(),
    }
}

const USER_ARGS: [&str; 8] = [
    "--base-url",
    "http://vllm.llm:8000",
    "--model",
    "Qwen/Qwen3-8B",
    "--num-prompts",
    "20000",
    "--max-concurrency",
    "4096",
];

#[test]
fn the_kubernetes_manifest() {
    insta::assert_snapshot!(k8s_manifest(&k8s(&USER_ARGS)).unwrap());
}

#[test]
fn the_manifest_parses_as_yaml_and_names_the_job_it_means() {
    let text = k8s_manifest(&k8s(&[&USER_ARGS[..], &["--metadata", "note=it's \"quoted\""]].concat())).unwrap();
    let docs: Vec<Value> =
        serde_norway::Deserializer::from_str(&text).map(|d| Value::deserialize(d).unwrap()).collect();
    assert_eq!(docs.len(), 2);
    let (service, job) = (&docs[0], &docs[1]);
    assert_eq!(service["kind"], "Service");
    assert_eq!(service["spec"]["clusterIP"], "None");
    assert_eq!(service["spec"]["selector"]["batch.kubernetes.io/job-name"], "bench-qwen");
    assert_eq!(job["kind"], "Job");
    assert_eq!(job["metadata"]["namespace"], "llm");
    assert_eq!(job["spec"]["completionMode"], "Indexed");
    assert_eq!(job["spec"]["completions"], 4);
    assert_eq!(job["spec"]["parallelism"], 4);
    let pod = &job["spec"]["template"]["spec"];
    assert_eq!(pod["subdomain"], "bench-qwen", "pods resolve as bench-qwen-N.bench-qwen through the Service");
    let container = &pod["containers"][0];
    assert_eq!(container["image"], "ghcr.io/example/servebench:0.1");
    let args: Vec<&str> = container["args"].as_sequence().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    assert_eq!(
        &args[..8],
        [
            "bench",
            "serve",
            "--shard",
            "auto/4",
            "--coordinator",
            "bench-qwen-0.bench-qwen:29500",
            "--result-dir",
            "/results/bench-qwen"
        ]
    );
    assert_eq!(&args[8..10], ["--request-id-prefix", "bench-qwen-"], "one prefix for every worker");
    assert_eq!(&args[10..18], USER_ARGS);
    assert_eq!(args[19], "note=it's \"quoted\"", "arguments survive YAML quoting");
    let env = container["env"].as_sequence().unwrap();
    assert_eq!(env[0]["name"], "JOB_COMPLETION_INDEX");
    assert_eq!(
        env[0]["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.annotations['batch.kubernetes.io/job-completion-index']"
    );
    assert_eq!((env[1]["name"].as_str(), env[1]["value"].as_str()), (Some("SERVEBENCH_WORLD"), Some("4")));
    assert_eq!(container["volumeMounts"][0]["mountPath"], "/results");
    assert_eq!(pod["volumes"][0]["persistentVolumeClaim"]["claimName"], "servebench-results");
}

#[test]
fn the_sbatch_script() {
    let args = SlurmArgs {
        common: common(&[&USER_ARGS[..], &["--label", "two words"]].concat()),
        nodes: Some(2),
        job_name: "servebench".into(),
        time: Some("01:00:00".into()),
        partition: Some("cpu".into()),
        results_dir: "/shared/results/".into(),
        binary: "/shared/bin/servebench".into(),
    };
    let script = sbatch_script(&args).unwrap();
    assert!(script.contains("srun --ntasks=4 /shared/bin/servebench bench serve --shard auto "), "{script}");
    assert!(script.contains(" --label 'two words'\n"), "{script}");
    assert!(script.contains(r#" --request-id-prefix "bench-$SLURM_JOB_ID-" --base-url"#), "{script}");
    assert!(script.trim_end().ends_with("/shared/bin/servebench merge \"$RESULTS\" --result-dir \"$RESULTS\""));
    insta::assert_snapshot!(script);
}

#[test]
fn flags_the_launcher_sets_or_that_cannot_shard_are_refused() {
    let e = k8s_manifest(&k8s(&["--shard", "0/4"])).unwrap_err().to_string();
    assert_eq!(e, "leave out --shard: the launcher sets it for every worker");
    let e = k8s_manifest(&k8s(&["--result-dir=/x"])).unwrap_err().to_string();
    assert_eq!(e, "leave out --result-dir: the launcher sets it for every worker");
    let e = k8s_manifest(&k8s(&["--sim", "Qwen/Qwen3-8B@h100-sxm"])).unwrap_err().to_string();
    assert!(e.starts_with("--sim would start a simulator inside every worker"), "{e}");
    let mut bad_name = k8s(&USER_ARGS);
    bad_name.name = "Bench_Qwen".into();
    assert!(k8s_manifest(&bad_name).unwrap_err().to_string().contains("lowercase letters"));
    for name in ["-abc", "1abc", "abc-", &"a".repeat(62)] {
        bad_name.name = name.into();
        assert!(k8s_manifest(&bad_name).unwrap_err().to_string().starts_with("--name"), "{name}");
    }
    bad_name.name = "a".repeat(61);
    assert!(k8s_manifest(&bad_name).is_ok(), "61 characters and one digit of index fit 63");
    let namespace = K8sArgs { namespace: Some("Bad_NS".into()), ..k8s(&USER_ARGS) };
    assert!(k8s_manifest(&namespace).unwrap_err().to_string().starts_with("--namespace"));
    let digit_first = K8sArgs { namespace: Some("1llm".into()), ..k8s(&USER_ARGS) };
    assert!(k8s_manifest(&digit_first).is_ok(), "a namespace is a DNS-1123 label: a digit may begin it");
    let relative = K8sArgs { results_dir: "rel/dir".into(), ..k8s(&USER_ARGS) };
    assert!(k8s_manifest(&relative).unwrap_err().to_string().contains("mount path is absolute"));
}

fn slurm() -> SlurmArgs {
    SlurmArgs {
        common: common(&USER_ARGS),
        nodes: None,
        job_name: "servebench".into(),
        time: None,
        partition: None,
        results_dir: "r".into(),
        binary: "servebench".into(),
    }
}

#[test]
fn values_written_into_the_script_or_manifest_cannot_break_its_lines() {
    let refused = |a: &SlurmArgs| sbatch_script(a).unwrap_err().to_string();
    let injected = SlurmArgs { job_name: "x\necho INJECTED".into(), ..slurm() };
    assert!(refused(&injected).starts_with("--job-name \"x\\necho INJECTED\" holds the control character"));
    let spaced = SlurmArgs { partition: Some("gpu a".into()), ..slurm() };
    assert!(refused(&spaced).contains("holds a space"), "{}", refused(&spaced));
    assert!(refused(&SlurmArgs { time: Some(String::new()), ..slurm() }).starts_with("--time is empty"));
    assert!(refused(&SlurmArgs { nodes: Some(0), ..slurm() }).starts_with("--nodes 0"));
    let spread = SlurmArgs { nodes: Some(3), common: LaunchCommon { workers: 2, ..common(&USER_ARGS) }, ..slurm() };
    assert!(refused(&spread).starts_with("--nodes 3 is more than --workers 2"), "{}", refused(&spread));
    let no_port = SlurmArgs { common: LaunchCommon { port: 0, ..common(&USER_ARGS) }, ..slurm() };
    assert!(refused(&no_port).starts_with("--port 0"));

    let refused = |a: &K8sArgs| k8s_manifest(a).unwrap_err().to_string();
    assert!(refused(&K8sArgs { image: String::new(), ..k8s(&USER_ARGS) }).starts_with("--image is empty"));
    let many = K8sArgs { common: LaunchCommon { workers: 100_001, ..common(&USER_ARGS) }, ..k8s(&USER_ARGS) };
    assert!(refused(&many).starts_with("--workers 100001: Kubernetes runs at most 100000 pods"), "{}", refused(&many));
    for cpu in ["NaN", "inf", "two", "+2", "", "m", "1mm"] {
        let e = refused(&K8sArgs { cpu: cpu.into(), ..k8s(&USER_ARGS) });
        assert!(e.contains("is not a CPU request"), "{cpu}: {e}");
    }
    for cpu in ["2", "0.5", "500m", "1m", "0.001", "1e-3"] {
        assert!(k8s_manifest(&K8sArgs { cpu: cpu.into(), ..k8s(&USER_ARGS) }).is_ok(), "{cpu}");
    }
    let typo = k8s(&[&USER_ARGS[..], &["--bogus-flag"]].concat());
    let e = refused(&typo);
    assert!(
        e.starts_with("the workers' `bench serve` flags after -- do not parse: unexpected argument '--bogus-flag'"),
        "{e}"
    );
    let dir = K8sArgs { results_dir: "/r\n  x: y".into(), ..k8s(&USER_ARGS) };
    assert!(refused(&dir).starts_with("--results-dir"), "{}", refused(&dir));
}

#[test]
fn shell_words_are_quoted_only_when_needed() {
    assert_eq!(shell_word("--model"), "--model");
    assert_eq!(shell_word("http://h:8000/v1"), "http://h:8000/v1");
    assert_eq!(shell_word("a b"), "'a b'");
    assert_eq!(shell_word("it's"), r"'it'\''s'");
    assert_eq!(shell_word("$HOME"), "'$HOME'");
    assert_eq!(shell_word(""), "''");
}

#[test]
fn a_sharded_sweep_runs_sweep_in_every_worker_and_merges_one_run_per_point() {
    let mut args = k8s(&["--base-url", "http://vllm.llm:8000", "--max-concurrency", "256,1024,4096"]);
    args.common.sweep = true;
    let text = k8s_manifest(&args).unwrap();
    assert!(text.contains("workers of one sharded `sweep`"), "{text}");
    assert!(text.contains("servebench merge --per-run /results/bench-qwen"), "{text}");
    assert!(text.contains("\n            - \"sweep\"\n            - \"--shard\""), "{text}");
    let slurm =
        SlurmArgs { common: LaunchCommon { sweep: true, ..common(&["--max-concurrency", "256,1024"]) }, ..slurm() };
    let script = sbatch_script(&slurm).unwrap();
    assert!(script.contains("srun --ntasks=4 servebench sweep --shard auto "), "{script}");
    assert!(script.contains("servebench merge --per-run \"$RESULTS\""), "{script}");
    let mut own = k8s(&["--request-id-prefix=mine-"]);
    own.common.sweep = true;
    assert!(!k8s_manifest(&own).unwrap().contains("\"bench-qwen-\""), "the user's prefix is kept");
    for refused in ["--search", "--predict"] {
        let mut a = k8s(&[refused]);
        a.common.sweep = true;
        let e = k8s_manifest(&a).unwrap_err().to_string();
        assert!(e.starts_with(&format!("leave out {refused}: sharded sweeps are grids")), "{e}");
    }
}

#[test]
fn a_cpu_request_below_1m_is_refused_saying_the_smallest() {
    for cpu in ["0.0001m", "0.5m", "0m", "0", "0.0005", "-1", "-1m"] {
        let e = k8s_manifest(&K8sArgs { cpu: cpu.into(), ..k8s(&USER_ARGS) }).unwrap_err().to_string();
        assert_eq!(
            e,
            format!(
                "--cpu {cpu:?} is below 1m: the smallest CPU request Kubernetes takes is 1m (0.001 cores); give 1m or more"
            )
        );
    }
}

#[test]
fn a_cpu_request_finer_than_1m_is_refused_saying_what_to_give() {
    for (cpu, give) in [("1.5m", "2m"), ("0.0015", "2m"), ("2.0001", "2001m")] {
        let e = k8s_manifest(&K8sArgs { cpu: cpu.into(), ..k8s(&USER_ARGS) }).unwrap_err().to_string();
        assert_eq!(
            e,
            format!(
                "--cpu {cpu:?} is finer than 1m: Kubernetes takes CPU in whole millicores (1m = 0.001 cores); give {give}"
            )
        );
    }
    for whole in ["1m", "250m", "0.5", "2", "1.25", "0.001"] {
        assert!(k8s_manifest(&K8sArgs { cpu: whole.into(), ..k8s(&USER_ARGS) }).is_ok(), "{whole}");
    }
}

#[test]
fn the_results_claim_must_be_a_kubernetes_claim_name() {
    let claim = |name: &str| k8s_manifest(&K8sArgs { results_claim: name.into(), ..k8s(&USER_ARGS) });
    assert_eq!(
        claim("Bad_Name").unwrap_err().to_string(),
        "--results-claim \"Bad_Name\": in Kubernetes a PersistentVolumeClaim's name is lowercase letters, digits, \
         '-' and '.', each part between dots begins and ends with a letter or digit, and here takes at most 253 \
         characters; give one such as servebench-results"
    );
    for bad in ["-results", "results-", "a..b", "a.-b", ".a", "a.", &"a".repeat(254)] {
        assert!(claim(bad).unwrap_err().to_string().starts_with("--results-claim"), "{bad}");
    }
    for good in ["results", "0results", "bench.results-1", &"a".repeat(253)] {
        let text = claim(good).unwrap();
        assert!(text.contains(&format!("claimName: \"{good}\"")), "{good}");
    }
    // The Job's and Service's name is checked by the same rule, with a Service's letter first.
    let name = K8sArgs { name: "Bench_Qwen".into(), ..k8s(&USER_ARGS) };
    assert!(k8s_manifest(&name).unwrap_err().to_string().contains("begins with a letter and ends"));
}

#[test]
fn a_sweeps_own_flags_are_checked_as_sweep_checks_them_before_the_job_is_printed() {
    let sweep = |flags: &[&str]| {
        let mut a = k8s(&[&["--base-url", "http://vllm.llm:8000", "--max-concurrency", "256,1024"], flags].concat());
        a.common.sweep = true;
        a
    };
    let e = k8s_manifest(&sweep(&["--by", "zzz"])).unwrap_err().to_string();
    assert_eq!(
        e,
        "the workers' `sweep` flags after --: --by zzz: this sweep varies max_concurrency; pick one of them, or \
         leave --by out"
    );
    assert!(k8s_manifest(&sweep(&["--by", "max_concurrency"])).is_ok());
    let slurm = SlurmArgs { common: sweep(&["--by", "zzz"]).common, ..slurm() };
    assert!(sbatch_script(&slurm).unwrap_err().to_string().contains("--by zzz: this sweep varies max_concurrency"));
    let e = k8s_manifest(&sweep(&["--slo", "p99_ttft_ms<500"])).unwrap_err().to_string();
    assert!(e.starts_with("the workers' `sweep` flags after --: invalid --slo \"p99_ttft_ms<500\""), "{e}");
    // One `bench serve` is not a sweep: --by is not its flag at all.
    let one = k8s(&["--by", "zzz"]);
    assert!(k8s_manifest(&one).unwrap_err().to_string().contains("do not parse"));
}
