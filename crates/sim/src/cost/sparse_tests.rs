//! DeepSeek sparse attention's terms: the attention bounded by its top-k tokens a query, in the
//! latent form over padded heads, and the indexer that scores every cached token on every GPU.

use super::tests::{decode_batch, model, prefill, setup};

#[test]
fn sparse_attention_reads_its_top_k_and_its_indexer_reads_every_key() {
    let id = "deepseek-ai/DeepSeek-V3.2";
    let c = model(id, "h200", &[("tp", "8")]);
    let window = setup(id, "h200", &[("tp", "8")]).model.pair_window();
    assert_eq!(window, 2048);
    // The engine builds batches with that window: at 1,000 tokens of context a decode reads
    // every latent, at 20,000 still 2,048, while the indexer reads all 20,000 keys.
    let batch = |ctx: u32| {
        let mut b = super::BatchStats::default();
        for _ in 0..16 {
            b.add_sequence(ctx, 1, window, false, true);
        }
        b
    };
    let (short, long) = (c.breakdown(&batch(2_000)), c.breakdown(&batch(20_000)));
    let latents = c.kv_bytes_token_layer * 61.0 * 16.0 * 2_049.0 / c.bandwidth;
    let keys = |ctx: f64| 61.0 * 132.0 * 16.0 * (ctx + 1.0) / c.bandwidth;
    // Bytes bind a decode: the latents read plus the indexer's keys.
    assert!((long.attention / (latents + keys(20_000.0)) - 1.0).abs() < 0.05, "{long:?}");
    assert!(long.attention > short.attention);
    assert!(long.attention - short.attention < 1.1 * (keys(20_000.0) - keys(2_000.0)) + 1e-3 * latents);
    // The latent form over 64 padded heads a GPU (16 of the model's 128 at TP8) in both
    // phases: 64 x (2 x 576 + 2 x 512) FLOPs a pair.
    assert_eq!(c.attn_flops_prefill, 64.0 * 2176.0);
    assert_eq!(c.attn_flops_decode, c.attn_flops_prefill);
    // Nothing is decompressed for the cached context of a chunk.
    assert_eq!(c.context_upproj.flops_per_row, 0.0);
}

#[test]
fn the_indexer_is_replicated_and_grows_with_the_square_of_a_prompt() {
    let id = "deepseek-ai/DeepSeek-V3.2";
    let (tp8, tp16) = (model(id, "h200", &[("tp", "8")]), model(id, "h200", &[("tp", "16"), ("nodes", "2")]));
    let ix = |c: &super::CostModel, tokens: u32| c.indexer_seconds(&prefill(tokens), super::RankShares::whole()).0;
    // Every GPU scores every pair: twice the GPUs, the same time.
    assert_eq!(ix(&tp8, 8_192), ix(&tp16, 8_192));
    // Twice the prompt, four times the pairs (within the diagonal's share).
    let ratio = ix(&tp8, 8_192) / ix(&tp8, 4_096);
    assert!((ratio - 4.0).abs() < 0.01, "{ratio}");
    // A model without sparse attention has no indexer.
    let r1 = model("deepseek-ai/DeepSeek-R1", "h200", &[("tp", "8")]);
    assert_eq!(ix(&r1, 8_192), 0.0);
    // On a B200 the sparse kernels pad to 128 heads.
    assert_eq!(model(id, "b200", &[("tp", "8")]).attn_flops_decode, 128.0 * 2176.0);
    // Dense MLA keeps its own forms and its 16 heads a GPU: prefill decompressed, decode absorbed.
    assert_eq!(r1.attn_flops_prefill, 16.0 * (2.0 * 192.0 + 2.0 * 128.0));
    assert_eq!(r1.attn_flops_decode, 16.0 * 2176.0);
    assert!(r1.breakdown(&decode_batch(4, 20_000)).attention > r1.breakdown(&decode_batch(4, 2_000)).attention);
}
