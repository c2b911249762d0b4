//! The splits of a held-out validation: which points each fit sees and which it predicts.

use proptest::prelude::*;

use super::points::MeasuredPoint;
use super::split::{Fold, Split, Training, fit_on_problem, folds_of};
use super::tests::point;

/// A run of `n` prompts labelled with these `key=value` pairs.
fn run(n: usize, labels: &[(&str, &str)]) -> MeasuredPoint {
    let mut p = point(n, 1024, 128, None);
    p.labels = labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    p
}

fn fit_on(spec: &str, per: &[&str]) -> Split {
    Split::fit_on(spec, &per.iter().map(|k| k.to_string()).collect::<Vec<_>>()).unwrap()
}

#[test]
fn each_deployment_is_fitted_on_the_loads_named_and_predicts_its_others() {
    // A study: two models, each at 1, 10 and 100 prompts; the second also at 1,000.
    let points: Vec<MeasuredPoint> = [("a", 1), ("a", 10), ("a", 100), ("b", 100), ("b", 10), ("b", 1), ("b", 1000)]
        .iter()
        .map(|&(model, n)| run(n, &[("model", model)]))
        .collect();
    let refs: Vec<&MeasuredPoint> = points.iter().collect();
    let folds = folds_of(&refs, &fit_on("num-prompts=1,100", &["model"]));
    assert_eq!(
        folds,
        [
            Fold { name: "model=a".into(), fit_on: vec![0, 2], predict: vec![1] },
            Fold { name: "model=b".into(), fit_on: vec![3, 5], predict: vec![4, 6] },
        ]
    );
    // `ends`: each deployment's own lowest and highest, numbers as numbers (1,000 above 100).
    let ends = folds_of(&refs, &fit_on("num-prompts=ends", &["model"]));
    assert_eq!(ends[0].fit_on, [0, 2]);
    assert_eq!(ends[1].fit_on, [5, 6], "b's ends are 1 and 1,000");
    assert_eq!(ends[1].predict, [3, 4]);
    // Without --per every result is one deployment.
    let one = folds_of(&refs, &fit_on("num-prompts=ends", &[]));
    assert_eq!(one, [Fold { name: "all results".into(), fit_on: vec![0, 5, 6], predict: vec![1, 2, 3, 4] }]);
}

#[test]
fn values_match_as_numbers_or_without_case_and_a_deployment_without_them_is_kept_unfitted() {
    let points = [
        run(8, &[("conc", "4.0"), ("hw", "B200")]),
        run(8, &[("conc", "64"), ("hw", "B200")]),
        run(8, &[("conc", "16"), ("hw", "b200")]),
        run(8, &[("conc", "16"), ("hw", "h100")]),
    ];
    let refs: Vec<&MeasuredPoint> = points.iter().collect();
    let folds = folds_of(&refs, &fit_on("conc=4,64", &["hw"]));
    assert_eq!(folds[0], Fold { name: "hw=B200".into(), fit_on: vec![0, 1], predict: vec![] });
    assert_eq!(folds[1], Fold { name: "hw=b200".into(), fit_on: vec![], predict: vec![2] });
    assert_eq!(folds[2], Fold { name: "hw=h100".into(), fit_on: vec![], predict: vec![3] });
    // Only B200 has both; nothing of it is left to predict: named, not run.
    let problem = fit_on_problem(&refs, &fit_on("conc=4,64", &["hw"])).unwrap();
    assert!(problem.contains("none is left to predict"), "{problem}");
    assert_eq!(fit_on_problem(&refs, &fit_on("conc=4", &[])), None);
    let absent = fit_on_problem(&refs, &fit_on("conc=8", &[])).unwrap();
    assert!(absent.contains("no result has conc 8") && absent.contains("4.0, 16, 64"), "{absent}");
}

#[test]
fn a_fit_on_spec_names_a_label_and_its_values() {
    assert_eq!(
        fit_on(" num-prompts = 1, 100 ", &[]),
        Split::FitOn { key: "num-prompts".into(), on: Training::Values(vec!["1".into(), "100".into()]), per: vec![] }
    );
    assert_eq!(
        fit_on("conc=ENDS", &["tp"]),
        Split::FitOn { key: "conc".into(), on: Training::Ends, per: vec!["tp".into()] }
    );
    for bad in ["num-prompts", "=1,100", "conc=", "conc= "] {
        let e = Split::fit_on(bad, &[]).unwrap_err();
        assert!(e.contains("KEY=VALUE,VALUE") && e.contains(bad), "{e}");
    }
}

#[test]
fn holding_out_by_group_keeps_its_folds() {
    let points = [run(1, &[("tp", "2")]), run(1, &[("tp", "8")]), run(1, &[("tp", "2")])];
    let refs: Vec<&MeasuredPoint> = points.iter().collect();
    let folds = folds_of(&refs, &Split::LeaveOut(vec!["tp".into()]));
    assert_eq!(
        folds,
        [
            Fold { name: "tp=2".into(), fit_on: vec![1], predict: vec![0, 2] },
            Fold { name: "tp=8".into(), fit_on: vec![0, 2], predict: vec![1] },
        ]
    );
    let folds = folds_of(&refs, &Split::Folds(2));
    assert_eq!(folds[0], Fold { name: "fold 1".into(), fit_on: vec![1], predict: vec![0, 2] });
    assert!(folds_of(&refs, &Split::None).is_empty());
}

proptest! {
    /// Every point of a deployment is either fitted on or predicted, never both, and never by
    /// another deployment's fit; `ends` fits on exactly the runs at its lowest and highest load.
    #[test]
    fn a_fit_on_split_partitions_each_deployment(
        runs in proptest::collection::vec((0u8..3, 1usize..6), 1..24),
    ) {
        let points: Vec<MeasuredPoint> =
            runs.iter().map(|&(d, n)| run(n * 10, &[("d", &d.to_string())])).collect();
        let refs: Vec<&MeasuredPoint> = points.iter().collect();
        let folds = folds_of(&refs, &fit_on("num-prompts=ends", &["d"]));
        let mut seen = vec![0; points.len()];
        for f in &folds {
            let members: Vec<usize> =
                (0..points.len()).filter(|&i| format!("d={}", runs[i].0) == f.name).collect();
            let mut both: Vec<usize> = f.fit_on.iter().chain(&f.predict).copied().collect();
            both.sort_unstable();
            prop_assert_eq!(&both, &members);
            let loads: Vec<usize> = members.iter().map(|&i| runs[i].1).collect();
            let (lo, hi) = (loads.iter().min().unwrap(), loads.iter().max().unwrap());
            for &i in &both {
                seen[i] += 1;
                prop_assert_eq!(f.fit_on.contains(&i), runs[i].1 == *lo || runs[i].1 == *hi);
            }
        }
        prop_assert!(seen.iter().all(|&s| s == 1));
    }
}
