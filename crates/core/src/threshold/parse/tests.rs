//! The spellings each flag accepts and refuses, and property tests: what a threshold prints
//! reads back as itself, and no text makes the reader panic.

use proptest::prelude::*;

use super::*;
use crate::threshold::Stat;

fn rule(quantity: Quantity, op: Op, bound: Bound) -> Threshold {
    Threshold { quantity, op, bound }
}

#[test]
fn fail_on_for_one_run_takes_values_and_refuses_changes() {
    assert_eq!(
        parse_fail_on_values(&["p99_ttft_ms>500, output_throughput < 1000,failed_pct>1"]).unwrap(),
        [
            rule(Quantity::Latency(Stat::Percentile(99.0), Metric::Ttft), Op::Above, Bound::Value(500.0)),
            rule(Quantity::OutputThroughput, Op::Below, Bound::Value(1000.0)),
            rule(Quantity::FailedPct, Op::Above, Bound::Value(1.0)),
        ]
    );
    for item in ["p99_ttft_ms>+10%", "p99_ttft_ms>+5", "output_throughput<-5", "median_itl_ms>5%"] {
        let err = parse_fail_on_values(&[item]).unwrap_err().to_string();
        assert!(err.contains("no baseline") && err.contains("servebench compare"), "{item}: {err}");
    }
    let err = parse_fail_on_values(&["p99_ttft_ms<=5"]).unwrap_err().to_string();
    assert!(err.contains("one of > and <"), "{err}");
    // One run's rules are values, and the hint shows values.
    for item in ["p99_ttft_ms>", ">>5", "p99_ttft_ms>NaN"] {
        let err = parse_fail_on_values(&[item]).unwrap_err().to_string();
        assert!(
            err.ends_with("write rules as KEY>VALUE or KEY<VALUE (for example p99_ttft_ms>500,output_throughput<1000)"),
            "{item}: {err}"
        );
    }
}

#[test]
fn a_fail_on_without_a_rule_is_refused_rather_than_turning_the_gate_off() {
    for text in ["", " ", ",", " , ,"] {
        assert!(parse_fail_on(&[text]).unwrap_err().to_string().contains("no rule given"), "{text:?}");
        assert!(parse_fail_on_values(&[text]).unwrap_err().to_string().contains("no rule given"), "{text:?}");
    }
    // Empty items between rules are still passed over.
    assert_eq!(parse_fail_on(&["p99_ttft_ms>+10%,,failed>1"]).unwrap().len(), 2);
}

#[test]
fn a_rule_given_twice_is_refused_naming_it_on_every_flag_that_reads_rules() {
    let why = |texts: &[&str]| parse_fail_on(texts).unwrap_err().to_string();
    assert_eq!(
        why(&["p99_ttft_ms>+10%", "p99_ttft_ms>+10%"]),
        "--fail-on \"p99_ttft_ms>+10%\" is given twice; give it once"
    );
    assert_eq!(
        why(&["output_throughput<5, p99_ttft_ms>+10%", " output_throughput < -5 "]),
        "--fail-on \"output_throughput<5\" is given twice (again as \"output_throughput < -5\"); give it once",
        "one parsed rule, however written"
    );
    assert!(why(&["failed>1,failed>1.0"]).starts_with("--fail-on \"failed>1\" is given twice"), "within one flag too");
    let one_run = parse_fail_on_values(&["p99_ttft_ms>500", "p99_ttft_ms > 500"]).unwrap_err();
    assert_eq!(
        one_run.to_string(),
        "--fail-on \"p99_ttft_ms>500\" is given twice (again as \"p99_ttft_ms > 500\"); give it once"
    );
    let slos = parse_slos(&["p99_ttft_ms<=500".into(), "p99_ttft_ms<=500.0".into()]).unwrap_err();
    assert_eq!(
        slos.to_string(),
        "--slo \"p99_ttft_ms<=500\" is given twice (again as \"p99_ttft_ms<=500.0\"); give it once"
    );
    // Other bounds, directions or quantities are other rules.
    assert_eq!(parse_fail_on(&["p99_ttft_ms>+10%", "p99_ttft_ms>+20%", "p99_ttft_ms>+10"]).unwrap().len(), 3);
    assert_eq!(parse_fail_on_values(&["output_throughput<100", "output_throughput>5000"]).unwrap().len(), 2);
    assert_eq!(parse_slos(&["p99_ttft_ms<=500,p90_ttft_ms<=500".into()]).unwrap().len(), 2);
}

#[test]
fn goodput_accepts_vllm_keys_and_refuses_others() {
    assert_eq!(parse_goodput("ttft:500").unwrap(), Slo { metric: Metric::Ttft, max_ms: 500.0 });
    assert_eq!(parse_goodput("tpot:50.5").unwrap(), Slo { metric: Metric::Tpot, max_ms: 50.5 });
    assert_eq!(parse_goodput("e2el:inf").unwrap().max_ms, f64::INFINITY);
    for (item, says) in [
        (
            "itl:5",
            "invalid --goodput metric \"itl\": the service level objective name should be one of ttft, tpot, e2el",
        ),
        ("ttft:-1", "invalid --goodput value \"ttft:-1\": the service level objective must be non-negative"),
        ("ttft:NaN", "must be non-negative"),
        ("ttft: 5", "invalid --goodput value \" 5\": not a number"),
        ("ttft", "invalid --goodput \"ttft\": use KEY:VALUE with a value in milliseconds, e.g. ttft:500"),
        ("ttft<=5", "use KEY:VALUE"),
    ] {
        let err = parse_goodput(item).unwrap_err().to_string();
        assert!(err.contains(says), "{item}: {err}");
    }
}

#[test]
fn rules_read_with_signs_percent_and_spaces() {
    let ttft = Quantity::Latency(Stat::P99, Metric::Ttft);
    let tpot = Quantity::Latency(Stat::Median, Metric::Tpot);
    assert_eq!(
        parse_fail_on(&["p99_ttft_ms>+10%,median_tpot_ms>5%"]).unwrap(),
        [rule(ttft, Op::Above, Bound::PercentChange(10.0)), rule(tpot, Op::Above, Bound::PercentChange(5.0))]
    );
    assert_eq!(
        parse_fail_on(&[" output_throughput < -5 % , median_tpot_ms>2"]).unwrap(),
        [
            rule(Quantity::OutputThroughput, Op::Below, Bound::PercentChange(-5.0)),
            rule(tpot, Op::Above, Bound::Change(2.0))
        ]
    );
    assert_eq!(parse_fail_on(&["output_throughput<5"]).unwrap()[0].bound, Bound::Change(-5.0));
    assert_eq!(parse_fail_on(&["p99_ttft_ms>+10%"]).unwrap()[0].to_string(), "p99_ttft_ms>+10%");
    assert_eq!(parse_fail_on(&["output_throughput<5%"]).unwrap()[0].to_string(), "output_throughput<-5%");
    // No rule at all is refused (a_fail_on_without_a_rule_is_refused_rather_than_turning_the_gate_off).
    assert!(parse_fail_on(&[" , "]).is_err());
}

#[test]
fn bad_rules_say_what_is_wrong() {
    let why = |s: &str| parse_fail_on(&[s]).unwrap_err().to_string();
    assert!(why("p99_ttft>+10%").contains("is not a quantity; use one of completed"), "{}", why("p99_ttft>+10%"));
    assert!(why("p90_ttft_ms>+10%").contains("is not a quantity"), "a comparison has no p90");
    assert!(why("p99_ttft_ms>-10%").contains("`>` looks for a rise"));
    assert!(why("output_throughput<+10%").contains("`<` looks for a fall"));
    assert!(why("p99_ttft_ms=10%").contains("exactly one of > and <"));
    assert!(why("p99_ttft_ms>=10%").contains("exactly one of > and <"));
    assert!(why("p99_ttft_ms>ten%").contains("\"ten\" is not a number"));
    assert!(why("p99_ttft_ms>5<3").contains("\"5<3\" is not a number"));
    assert!(why("p99_ttft_ms>x").starts_with("--fail-on \"p99_ttft_ms>x\": "), "{}", why("p99_ttft_ms>x"));
}

#[test]
fn slos_parse_with_their_direction_and_print_back() {
    let slos = parse_slos(&["p99_ttft_ms<=500, median_tpot_ms<=50".into(), "p99.9_e2el_ms<=2000".into()]).unwrap();
    let texts: Vec<String> = slos.iter().map(Threshold::to_string).collect();
    assert_eq!(texts, ["p99_ttft_ms<=500", "median_tpot_ms<=50", "p99.9_e2el_ms<=2000"]);
    assert_eq!(slos[2].quantity, Quantity::Latency(Stat::Percentile(99.9), Metric::E2el));
    let t = parse_slo("output_throughput>=1000").unwrap();
    assert_eq!((t.op, t.bound), (Op::AtLeast, Bound::Value(1000.0)));
    assert_eq!(parse_slo("failed_pct<=1").unwrap().quantity, Quantity::FailedPct);
    assert_eq!(parse_slo(" p99_ttft_ms <= +5 ").unwrap().bound, Bound::Value(5.0));
    // What a new, light request waits under the load: the probes' latency.
    let probe = parse_slo("probe_p99_e2el_ms<=200").unwrap();
    assert_eq!((probe.quantity, probe.op), (Quantity::ProbeE2el(Stat::P99), Op::AtMost));
    assert!(parse_slo("probe_max_e2el_ms>=5").unwrap_err().to_string().contains("bounded with <="));
    // A pooling run's inputs a second.
    let inputs = parse_slo("input_sequence_throughput>=150").unwrap();
    assert_eq!((inputs.quantity, inputs.op), (Quantity::InputThroughput, Op::AtLeast));
    assert!(parse_slo("input_sequence_throughput<=5").unwrap_err().to_string().contains("bounded with >="));
}

#[test]
fn bad_slos_say_what_to_write() {
    for (item, says) in [
        ("p99_ttft_ms<500", "KEY<=VALUE"),
        ("p99_ttfx_ms<=5", "unknown key"),
        ("p101_ttft_ms<=5", "unknown key"),
        ("completed>=5", "unknown key"),
        ("p99_ttft_ms>=5", "bounded with <="),
        ("output_throughput<=5", "bounded with >="),
        ("p99_ttft_ms<=fast", "not a number"),
        ("p99_ttft_ms<=-1", "not a number"),
    ] {
        let err = parse_slo(item).unwrap_err().to_string();
        assert!(err.contains(says), "{item}: {err}");
    }
    assert!(parse_slo("x").unwrap_err().to_string().starts_with("invalid --slo \"x\": use KEY<=VALUE"));
}

fn latency() -> impl Strategy<Value = Quantity> {
    let stat = prop_oneof![
        Just(Stat::Mean),
        Just(Stat::Median),
        (0u32..=1000).prop_map(|t| Stat::Percentile(f64::from(t) / 10.0)),
        (0.0f64..=100.0).prop_map(Stat::Percentile),
    ];
    let metric = prop::sample::select(crate::threshold::LATENCIES.to_vec());
    (stat, metric).prop_map(|(s, m)| Quantity::Latency(s, m))
}

fn amount() -> impl Strategy<Value = f64> {
    prop_oneof![(0u32..100_000).prop_map(f64::from), 0.0f64..1e6, (0u32..10_000).prop_map(|x| f64::from(x) / 100.0)]
}

fn spaced(text: String, pad: usize) -> String {
    format!("{}{text}{}", " ".repeat(pad), " ".repeat(pad))
}

proptest! {
    #[test]
    fn a_rule_reads_back_as_itself(
        quantity in prop::sample::select(Quantity::all()),
        rise in any::<bool>(),
        size in amount(),
        percent in any::<bool>(),
        pad in 0usize..3,
    ) {
        let (op, signed) = if rise { (Op::Above, size) } else { (Op::Below, -size) };
        let bound = if percent { Bound::PercentChange(signed) } else { Bound::Change(signed) };
        let t = Threshold { quantity, op, bound };
        prop_assert_eq!(parse_fail_on(&[spaced(t.to_string(), pad)]).unwrap(), vec![t.clone()]);
        let two = format!("{t},{t}");
        let repeated = parse_fail_on(&[two]).unwrap_err();
        prop_assert!(matches!(repeated, ThresholdError::Repeated { .. }), "{}", repeated);
    }

    #[test]
    fn an_slo_reads_back_as_itself(
        quantity in prop_oneof![
            latency(),
            Just(Quantity::FailedPct),
            Just(Quantity::OutputThroughput),
            Just(Quantity::RequestThroughput),
            Just(Quantity::TotalTokenThroughput),
        ],
        limit in amount(),
        pad in 0usize..3,
    ) {
        let op = if quantity.higher_is_better() { Op::AtLeast } else { Op::AtMost };
        let t = Threshold { quantity, op, bound: Bound::Value(limit) };
        let text = spaced(t.to_string(), pad);
        prop_assert_eq!(parse_slos(&[text]).unwrap(), vec![t]);
    }

    #[test]
    fn a_goodput_reads_back_as_itself(
        metric in prop::sample::select(vec![Metric::Ttft, Metric::Tpot, Metric::E2el]),
        max_ms in amount(),
    ) {
        let slo = parse_goodput(&format!("{}:{max_ms}", metric.key())).unwrap();
        prop_assert_eq!(slo, Slo { metric, max_ms });
    }

    #[test]
    fn no_text_makes_the_reader_panic(text in "\\PC{0,24}", ops in "[<>=:%+,. -]{0,6}", key in "[a-z0-9_.]{0,20}") {
        for candidate in [text.clone(), format!("{key}{ops}{text}"), format!("{key}{ops}")] {
            let _ = parse_fail_on(std::slice::from_ref(&candidate));
            let _ = parse_slos(std::slice::from_ref(&candidate));
            let _ = parse_goodput(&candidate);
        }
    }
}
