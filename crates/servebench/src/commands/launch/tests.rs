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
    for cpu in ["0", "-1", "NaN", "inf", "two", "+2", ""] {
        let e = refused(&K8sArgs { cpu: cpu.into(), ..k8s(&USER_ARGS) });
        assert!(e.contains("is not a CPU request"), "{cpu}: {e}");
    }
    for cpu in ["2", "0.5", "500m"] {
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
