//! Reading the runs a command names from the store.

use servebench_store::{RunFilter, RunId, RunRef, RunSpec, Store, StoredRun};

use crate::ReportError;

/// Which runs.
#[derive(Clone, Debug, PartialEq)]
pub enum Selection {
    /// These runs, in this order (a range in number order).
    Runs(Vec<RunSpec>),
    /// The runs that match, in number order (the default filter matches every run).
    Filter(RunFilter),
}

/// Which runs' per-request records to read along (they can be large).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Records {
    /// None.
    None,
    /// Every run's.
    All,
    /// Those of the first `first` runs that have records, and of run `also`.
    Some { first: usize, also: Option<RunId> },
}

/// The selected runs with the records asked for; an error when none match.
pub fn load(store: &Store, selection: &Selection, records: &Records) -> Result<Vec<StoredRun>, ReportError> {
    let ids: Vec<RunId> = match selection {
        Selection::Runs(specs) => store.resolve_all(specs)?,
        Selection::Filter(filter) => store.list(filter)?.into_iter().map(|row| row.id).collect(),
    };
    if ids.is_empty() {
        return Err(ReportError::NoRuns);
    }
    if let Some((i, _)) = ids.iter().enumerate().find(|(i, id)| ids[..*i].contains(id)) {
        return Err(ReportError::RunTwice(ids[i]));
    }
    let mut runs = ids.iter().map(|&id| store.get_without_records(&RunRef::Id(id))).collect::<Result<Vec<_>, _>>()?;
    let mut taken = 0;
    for run in &mut runs {
        if run.row.chunk_times.is_none() {
            continue;
        }
        let wanted = match records {
            Records::None => false,
            Records::All => true,
            Records::Some { first, also } => taken < *first || *also == Some(run.row.id),
        };
        if wanted {
            run.records = store.records(&RunRef::Id(run.row.id))?;
            taken += 1;
        }
    }
    Ok(runs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::Synth;

    fn store() -> Store {
        let mut store = Store::open_in_memory().unwrap();
        for seed in 0..3 {
            store.insert(&Synth::new("m", seed).new_run().with_label("n", &seed.to_string())).unwrap();
        }
        store
    }

    #[test]
    fn runs_come_in_the_order_named_with_the_records_asked_for() {
        let store = store();
        let named = Selection::Runs(vec![RunRef::Id(3).into(), RunRef::Id(1).into()]);
        let runs = load(&store, &named, &Records::All).unwrap();
        assert_eq!(runs.iter().map(|r| r.row.id).collect::<Vec<_>>(), [3, 1]);
        assert!(runs.iter().all(|r| r.records.as_ref().is_some_and(|rec| rec.records.len() == 60)));
        let runs =
            load(&store, &Selection::Filter(RunFilter::default()), &Records::Some { first: 1, also: Some(3) }).unwrap();
        let with: Vec<bool> = runs.iter().map(|r| r.records.is_some()).collect();
        assert_eq!(with, [true, false, true]);
        assert!(load(&store, &named, &Records::None).unwrap().iter().all(|r| r.records.is_none()));
    }

    #[test]
    fn no_match_and_unknown_runs_are_errors() {
        let store = store();
        let filter = RunFilter { labels: vec![("n".into(), Some("9".into()))], ..RunFilter::default() };
        assert!(matches!(load(&store, &Selection::Filter(filter), &Records::None), Err(ReportError::NoRuns)));
        let err = load(&store, &Selection::Runs(vec![RunRef::Id(7).into()]), &Records::None).unwrap_err();
        assert!(err.to_string().contains("there is no run 7"), "{err}");
        let twice = Selection::Runs(vec![
            RunSpec::Range(1, 3),
            RunRef::Uid(store.get_without_records(&RunRef::Id(2)).unwrap().row.uid).into(),
        ]);
        let err = load(&store, &twice, &Records::None).unwrap_err();
        assert!(matches!(err, ReportError::RunTwice(2)), "{err}");
    }
}
