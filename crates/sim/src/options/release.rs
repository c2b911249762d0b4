//! Which vLLM release a label names (`vllm-release`, a result's `vllm` label or image tag).

/// The vLLM release (major, minor) a label names: `v0.13.0`, `0.10.1`, an image such as
/// `vllm/vllm-openai:v0.13.0` or `rocm/7.0:rocm7.0_ubuntu_22.04_vllm_0.10.1_instinct_20250927`
/// (the number after its last `vllm`); none where it names no number (`rocm`, `nightly`).
pub fn vllm_release(label: &str) -> Option<(u32, u32)> {
    let text = label.to_ascii_lowercase();
    let after_vllm = text.rfind("vllm").map(|i| i + "vllm".len());
    let tail = &text[after_vllm.unwrap_or(0)..];
    let start = tail.find(|c: char| c.is_ascii_digit())?;
    // Without a `vllm` in it, only a label that is a release (`v0.13.0`, `0.10.1`) counts.
    if after_vllm.is_none() && !tail[..start].chars().all(|c| c == 'v') {
        return None;
    }
    let mut parts = tail[start..].split(|c: char| !c.is_ascii_digit());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next().filter(|m| !m.is_empty())?.parse().ok()?;
    Some((major, minor))
}
