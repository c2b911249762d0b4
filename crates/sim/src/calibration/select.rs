//! Which measured points a fit for one model uses.
//!
//! A report of several models (`Results Qwen/Qwen3-8B`, `Results Qwen/Qwen3-4B`, ...) or a
//! folder of result files mixes runs the fitted deployment did not serve. When the points name
//! models ([`MeasuredPoint::model`]) and some are the fitted model, only those are fitted; the
//! others, and those that name no model, are left out and counted. When none is the fitted
//! model that is an error listing the models found. When no point names a model, all are
//! fitted: nothing says they are of another one.
//!
//! Two names are the same model when they are equal ignoring case, or when their parts
//! after the last `/` are (`Qwen3-8B` is `Qwen/Qwen3-8B`).

use super::CalibrationError;
use super::points::MeasuredPoint;

/// The points of the fitted model, and what was left out.
#[derive(Clone, Debug, PartialEq)]
pub struct Selection {
    pub points: Vec<MeasuredPoint>,
    /// Points left out for being of another model: each model with its count, in the order
    /// first seen.
    pub other_models: Vec<(String, usize)>,
    /// Points left out for naming no model while others do.
    pub unnamed: usize,
}

impl Selection {
    /// How many points were left out.
    pub fn skipped(&self) -> usize {
        self.other_models.iter().map(|(_, n)| n).sum::<usize>() + self.unnamed
    }

    /// Why points were left out, as one sentence part (`10 of other models (A, B ×2), 1 that
    /// names no model`); empty when none was.
    pub fn skipped_reasons(&self) -> String {
        let mut parts = Vec::new();
        let others: usize = self.other_models.iter().map(|(_, n)| n).sum();
        if others > 0 {
            parts.push(format!("{others} of other models ({})", models_list(&self.other_models)));
        }
        if self.unnamed > 0 {
            let verb = if self.unnamed == 1 { "names" } else { "name" };
            parts.push(format!("{} that {verb} no model", self.unnamed));
        }
        parts.join(", ")
    }
}

/// Whether the names `a` and `b` are of one model (see the module docs).
pub fn same_model(a: &str, b: &str) -> bool {
    let (a, b) = (a.trim(), b.trim());
    let last = |s: &str| s.rsplit('/').next().unwrap_or_default().to_string();
    let (la, lb) = (last(a), last(b));
    !a.is_empty() && !b.is_empty() && (a.eq_ignore_ascii_case(b) || (!la.is_empty() && la.eq_ignore_ascii_case(&lb)))
}

/// The points of the model called any of `names` (the `--model` given and the resolved id,
/// say). Errors when the points name models and none is one of `names`.
pub fn select_model(points: Vec<MeasuredPoint>, names: &[&str]) -> Result<Selection, CalibrationError> {
    let mut selection = Selection { points: Vec::new(), other_models: Vec::new(), unnamed: 0 };
    if points.iter().all(|p| p.model().is_none()) {
        selection.points = points;
        return Ok(selection);
    }
    for point in points {
        match point.model() {
            Some(m) if names.iter().any(|n| same_model(n, m)) => selection.points.push(point),
            Some(m) => match selection.other_models.iter_mut().find(|(seen, _)| seen == m) {
                Some((_, n)) => *n += 1,
                None => selection.other_models.push((m.to_string(), 1)),
            },
            None => selection.unnamed += 1,
        }
    }
    if selection.points.is_empty() {
        let mut found = models_list(&selection.other_models);
        if selection.unnamed > 0 {
            found.push_str(&format!(", and {} that name(s) no model", selection.unnamed));
        }
        return Err(CalibrationError::NoPointOfModel {
            model: names.first().copied().unwrap_or_default().to_string(),
            found,
            points: selection.skipped(),
        });
    }
    Ok(selection)
}

/// `A, B ×2`: the models with their counts above one.
fn models_list(models: &[(String, usize)]) -> String {
    let each = models.iter().map(|(m, n)| if *n > 1 { format!("{m} ×{n}") } else { m.clone() });
    each.collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calibration::points::PointWorkload;

    fn point(model: Option<&str>) -> MeasuredPoint {
        MeasuredPoint {
            label: format!("{model:?}"),
            headings: Vec::new(),
            labels: model.map(|m| vec![("model".to_string(), m.to_string())]).unwrap_or_default(),
            workload: PointWorkload::even(1, 1, 1, None),
            measured: Vec::new(),
        }
    }

    #[test]
    fn names_match_ignoring_case_and_the_organisation() {
        assert!(same_model("Qwen/Qwen3-8B", "qwen/qwen3-8b"));
        assert!(same_model("Qwen3-8B", "Qwen/Qwen3-8B") && same_model("Qwen/Qwen3-8B", "Qwen3-8B"));
        assert!(same_model("unsloth/Qwen3-8B", "Qwen/Qwen3-8B"));
        assert!(!same_model("Qwen/Qwen3-8B", "Qwen/Qwen3-8B-FP8") && !same_model("Qwen/Qwen3-8B", "Qwen/Qwen3-4B"));
        assert!(!same_model("", "") && !same_model("Qwen/", "Qwen/Qwen3-8B"));
    }

    #[test]
    fn only_the_fitted_model_s_points_are_kept_and_the_rest_counted() {
        let points = vec![point(Some("A/x")), point(Some("B/y")), point(None), point(Some("a/X")), point(Some("B/y"))];
        let s = select_model(points, &["x"]).unwrap();
        assert_eq!(s.points.iter().map(|p| p.model()).collect::<Vec<_>>(), [Some("A/x"), Some("a/X")]);
        assert_eq!((s.other_models.clone(), s.unnamed, s.skipped()), (vec![("B/y".to_string(), 2)], 1, 3));
        assert_eq!(s.skipped_reasons(), "2 of other models (B/y ×2), 1 that names no model");
    }

    #[test]
    fn points_that_name_no_model_are_all_fitted() {
        let s = select_model(vec![point(None), point(None)], &["Qwen/Qwen3-8B"]).unwrap();
        assert_eq!((s.points.len(), s.skipped(), s.skipped_reasons().as_str()), (2, 0, ""));
    }

    #[test]
    fn no_point_of_the_model_is_an_error_listing_the_models() {
        let err = select_model(vec![point(Some("A/x")), point(Some("B/y")), point(None)], &["C/z", "z"]).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("no measured point is of C/z"), "{text}");
        assert!(text.contains("the 3 point(s) given are of A/x, B/y, and 1 that name(s) no model."), "{text}");
        assert!(text.contains("--model") && text.contains("--all-points"), "{text}");
    }
}
