//! The shape of the request lengths behind a report that gives only totals, for the public
//! datasets a report's heading may name (`dataset=sharegpt`, from a pasted `vllm bench serve
//! --dataset-name sharegpt` line, or a result JSON's `--metadata dataset=sharegpt`): ShareGPT's prompts and completions are mostly short with a
//! long tail, and a burst of them lasts as long as its longest completions, which totals spread
//! evenly would never show.

use super::points::{Lengths, MeasuredPoint};

/// ShareGPT's prompt lengths as vLLM's benchmark samples them (first human turn, first reply;
/// prompts of 4 to 1,024 tokens, prompt and reply at most 2,048), as multiples of their mean:
/// `(p, length / mean)` points of the inverse CDF. Measured with servebench's own sampler on
/// 4,000 prompts of the shared ShareGPT file, tokenized with gpt-oss's and Qwen3's tokenizers
/// (the two agree to 0.02 at every point; these are gpt-oss's).
pub const SHAREGPT_PROMPTS: [(f64, f64); 10] = [
    (0.0, 0.018),
    (0.05, 0.037),
    (0.10, 0.046),
    (0.25, 0.087),
    (0.50, 0.503),
    (0.75, 1.656),
    (0.90, 2.722),
    (0.95, 3.390),
    (0.99, 4.022),
    (1.0, 4.640),
];

/// ShareGPT's completion lengths (the requests' `max_tokens`) the same way.
pub const SHAREGPT_COMPLETIONS: [(f64, f64); 10] = [
    (0.0, 0.020),
    (0.05, 0.040),
    (0.10, 0.051),
    (0.25, 0.126),
    (0.50, 0.677),
    (0.75, 1.577),
    (0.90, 2.432),
    (0.95, 3.074),
    (0.99, 3.964),
    (1.0, 9.252),
];

/// Gives a point whose lengths are only totals the shape of the dataset its `dataset` label
/// names, keeping the totals; prompt and completion lengths are paired in two different
/// orders (in ShareGPT a long prompt does not mean a long reply). Other points, and datasets
/// without a known shape (`random` gives its lengths in its totals), are left as they are.
/// Called by the readers' one finishing step, on points of no more requests than a fit
/// simulates ([`super::read::FileRead::finished`]).
pub(super) fn shape_by_dataset(point: &mut MeasuredPoint) {
    let named = point.labels.iter().find(|(k, _)| k == "dataset").map(|(_, v)| v.to_ascii_lowercase());
    if named.as_deref() != Some("sharegpt") {
        return;
    }
    let w = &mut point.workload;
    let (Lengths::Even { total: input }, Lengths::Even { total: output }) = (&w.input, &w.output) else {
        return;
    };
    let n = w.num_prompts;
    let prompts = Lengths::Shape { total: *input, quantiles: SHAREGPT_PROMPTS.to_vec() }.expand(n);
    let replies = Lengths::Shape { total: *output, quantiles: SHAREGPT_COMPLETIONS.to_vec() }.expand(n);
    // A second fixed order for the replies: the prompts' order read backwards.
    w.input = Lengths::Each(prompts);
    w.output = Lengths::Each(replies.into_iter().rev().collect());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calibration::points::points_from_report;

    const REPORT: &str = include_str!("../../testdata/public/vllm-pr-23696-b200-gpt-oss-120b-sharegpt.txt");

    #[test]
    fn a_sharegpt_report_keeps_its_totals_with_the_dataset_s_long_tail() {
        let p = points_from_report(REPORT, "r.txt").unwrap().remove(0);
        let (input, output) = (p.workload.input.expand(1000), p.workload.output.expand(1000));
        let sum = |v: &[u32]| v.iter().map(|&x| u64::from(x)).sum::<u64>();
        // Rounding keeps the totals within a token or so a request.
        assert!(sum(&input).abs_diff(215_312) < 1000 && sum(&output).abs_diff(197_144) < 1000);
        let (longest, median) = (*output.iter().max().unwrap(), {
            let mut s = output.clone();
            s.sort_unstable();
            s[500]
        });
        // The longest reply is several times the mean (197), the median well under it.
        assert!(longest > 1500 && median < 197, "{longest} {median}");
        // Long prompts are not all paired with long replies.
        let top_prompt = input.iter().enumerate().max_by_key(|(_, x)| **x).unwrap().0;
        assert!(output[top_prompt] < 1000, "{}", output[top_prompt]);
        // Without the label, the totals are spread evenly as before.
        let plain = points_from_report(&REPORT.replacen("--dataset-name sharegpt", "", 1), "r.txt").unwrap().remove(0);
        assert_eq!(plain.workload.output, Lengths::Even { total: 197_144 });
        // A result JSON without per-request lengths takes the label from its metadata.
        let doc = serde_json::json!({
            "model_id": "m", "completed": 1000, "total_input_tokens": 215312, "total_output_tokens": 197144,
            "duration": 26.62, "request_throughput": 37.56, "output_throughput": 7404.72,
            "mean_ttft_ms": 3449.17, "median_ttft_ms": 3229.56,
            "dataset": "ShareGPT",
        });
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("r.json");
        std::fs::write(&file, doc.to_string()).unwrap();
        let json = crate::calibration::read::read_points(&file).unwrap().remove(0);
        assert_eq!(json.workload.output, p.workload.output);
    }
}
