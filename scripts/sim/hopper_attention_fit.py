#!/usr/bin/env python3
"""Fits Hopper's attention constants to FlashAttention 3's own H100 figures.

The data: the FlashAttention 3 paper's BF16 forward benchmark on an H100 SXM (16,384 tokens a
call, causal), TFLOP/s at 512 to 16,384 tokens and head widths 64, 128 and 256. The form, as
`cost::terms::attention_seconds` and the tile term price a fresh causal prefill: a pair's time
on one head is (longer + exposed x shorter) of the tensor cores' 4 x width FLOPs at the BF16
peak and one exponential at the SFUs' rate, over `attn_eff`, and each query pays `k0` keys of
tile work beside its `k` = tokens / 2 mean keys. For each (exposed, k0) on a grid the best
`attn_eff` is closed-form (it scales every rate alike: the mean of the log ratios); the fit
minimises the squared log errors. Standard library only; prints the fit and each figure's error
(CALIBRATION.md, "Hopper's attention: exponentials in series").

Usage: python3 scripts/sim/hopper_attention_fit.py
"""
import math

PEAK_BF16 = 989.0  # TFLOP/s, the H100 SXM preset
EXP2 = 3.865  # tera exponentials a second, the H100 SXM preset
TOKENS = [512, 1024, 2048, 4096, 8192, 16384]
CAUSAL = {
    64: [197, 265, 371, 420, 460, 473],
    128: [292, 423, 521, 579, 602, 616],
    256: [286, 427, 537, 612, 628, 642],
}


def shape(width, tokens, exposed, k0):
    """log of the priced rate at attn_eff = 1."""
    tensor, exps = 4 * width / PEAK_BF16, 1 / EXP2
    pair = max(tensor, exps) + exposed * min(tensor, exps)
    k = tokens / 2
    return math.log(4 * width / (pair * (k + k0) / k))


def fit(exposed, k0):
    logs = [math.log(m) - shape(w, t, exposed, k0) for w, ms in CAUSAL.items() for t, m in zip(TOKENS, ms)]
    log_eff = sum(logs) / len(logs)
    return sum((x - log_eff) ** 2 for x in logs) / len(logs), math.exp(log_eff)


def report(label, exposed, k0):
    mse, eff = fit(exposed, k0)
    print(f"{label}: attn_eff {eff:.3f}, attn_exp_exposed {exposed:.2f}, attn_query_keys {k0:.0f}, rms {math.sqrt(mse):.3f}")
    for w, ms in CAUSAL.items():
        errs = [math.exp(shape(w, t, exposed, k0)) * eff / m - 1 for t, m in zip(TOKENS, ms)]
        print(f"  width {w:3}: " + " ".join(f"{100 * e:+5.1f}%" for e in errs))


best = min((fit(s / 100, k0)[0], s / 100, k0) for s in range(101) for k0 in range(0, 1001, 5))
report("best", best[1], best[2])
report("shipped", 0.73, 350)
for s in (0.0, 1.0):
    b = min((fit(s, k0)[0], k0) for k0 in range(0, 1001, 5))
    report(f"exposed {s:.0f}", s, b[1])
