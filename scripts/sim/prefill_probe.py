#!/usr/bin/env python3
"""How fast a dense prefill step runs on the GPU at hand: kernels alone, a whole layer, sustained.

Served prefill of dense models on vLLM 0.11 comes out at about 0.28 of the H100's BF16 peak
where cuBLAS alone reaches 0.70 (crates/sim/presets/hardware/CALIBRATION.md, "What is left").
This probe measures the two candidates a GPU can settle:

- a whole decoder layer of Qwen3-14B's shapes (RMSNorm, QKV, the q/k norms, rotary embedding,
  causal attention through PyTorch's scaled_dot_product_attention, output product, SwiGLU MLP,
  residuals) over one chunk of 8,192 prompt tokens, against its products alone: what the
  kernels between the products and the attention cost;
- the same products sustained for about a minute, with the SM clock read every few seconds:
  whether the GPU slows down (power, heat) once it runs flat out for as long as a burst of long
  prompts keeps it busy.

Usage (needs PyTorch with CUDA, and kernel_probe.py beside it for the record keeping):

    python3 scripts/sim/prefill_probe.py --out prefill.json [--sustain-s 60]

The JSON holds the device, the library versions and one record per measurement.
"""

import argparse
import json
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

from kernel_probe import RECORDS, log, record  # the sibling probe's record keeping (same folder)

HIDDEN, HEADS, KV_HEADS, HEAD_DIM, INTER = 5120, 40, 8, 128, 17408  # Qwen3-14B

def timed_ms(fn, reps=10):
    fn()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(reps):
        fn()
    b.record()
    b.synchronize()
    return a.elapsed_time(b) / reps


def sm_clock_mhz():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,power.draw,temperature.gpu",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=5)
        clock, power, temp = (x.strip() for x in out.stdout.split(",")[:3])
        return float(clock), float(power), float(temp)
    except Exception:  # noqa: BLE001 - a missing reading is recorded as such
        return None, None, None


class Layer:
    def __init__(self, tokens):
        d = dict(device="cuda", dtype=torch.bfloat16)
        q, kv = HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM
        self.w_qkv = torch.randn(HIDDEN, q + 2 * kv, **d) * 0.02
        self.w_o = torch.randn(q, HIDDEN, **d) * 0.02
        self.w_gu = torch.randn(HIDDEN, 2 * INTER, **d) * 0.02
        self.w_down = torch.randn(INTER, HIDDEN, **d) * 0.02
        self.norm = torch.ones(HIDDEN, **d)
        self.qk_norm = torch.ones(HEAD_DIM, **d)
        self.x = torch.randn(tokens, HIDDEN, **d)
        pos = torch.arange(tokens, device="cuda", dtype=torch.float32)[:, None]
        inv = 1.0 / (1e6 ** (torch.arange(0, HEAD_DIM, 2, device="cuda", dtype=torch.float32) / HEAD_DIM))
        ang = pos * inv
        self.cos, self.sin = ang.cos().to(torch.bfloat16), ang.sin().to(torch.bfloat16)
        self.tokens = tokens

    def rope(self, t):
        t1, t2 = t[..., : HEAD_DIM // 2], t[..., HEAD_DIM // 2:]
        c, s = self.cos[:, None, :], self.sin[:, None, :]
        return torch.cat((t1 * c - t2 * s, t2 * c + t1 * s), dim=-1)

    def products(self):
        x = self.x
        x @ self.w_qkv
        torch.empty(self.tokens, HEADS * HEAD_DIM, device="cuda", dtype=torch.bfloat16) @ self.w_o
        h = x @ self.w_gu
        h[:, :INTER] @ self.w_down

    def forward(self):
        n = self.tokens
        x = self.x
        h = F.rms_norm(x, (HIDDEN,), self.norm)
        qkv = h @ self.w_qkv
        q, k, v = qkv.split([HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM], dim=-1)
        q = F.rms_norm(q.view(n, HEADS, HEAD_DIM), (HEAD_DIM,), self.qk_norm)
        k = F.rms_norm(k.view(n, KV_HEADS, HEAD_DIM), (HEAD_DIM,), self.qk_norm)
        q, k = self.rope(q), self.rope(k)
        v = v.view(n, KV_HEADS, HEAD_DIM)
        a = F.scaled_dot_product_attention(q.transpose(0, 1)[None], k.transpose(0, 1)[None],
                                           v.transpose(0, 1)[None], is_causal=True, enable_gqa=True)
        a = a[0].transpose(0, 1).reshape(n, HEADS * HEAD_DIM)
        x = x + a @ self.w_o
        h = F.rms_norm(x, (HIDDEN,), self.norm)
        gu = h @ self.w_gu
        return x + (F.silu(gu[:, :INTER]) * gu[:, INTER:]) @ self.w_down

    def flops(self, with_attention):
        n = self.tokens
        lin = 2.0 * n * (HIDDEN * (HEADS + 2 * KV_HEADS) * HEAD_DIM + HEADS * HEAD_DIM * HIDDEN
                         + HIDDEN * 2 * INTER + INTER * HIDDEN)
        attn = 2.0 * 2.0 * HEADS * HEAD_DIM * n * n / 2.0  # causal: half the pairs
        return lin + (attn if with_attention else 0.0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--sustain-s", type=float, default=60.0)
    ap.add_argument("--tokens", type=int, default=8192)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("prefill_probe: no CUDA device; this probe measures a GPU and needs one")
    torch.set_grad_enabled(False)
    props = torch.cuda.get_device_properties(0)
    head = {"device": props.name, "sms": props.multi_processor_count, "torch": torch.__version__,
            "cuda": torch.version.cuda}
    log(head)
    layer = Layer(args.tokens)
    clock, power, temp = sm_clock_mhz()
    record("idle", sm_clock_mhz=clock, power_w=power, temp_c=temp)
    ms = timed_ms(layer.products)
    record("products alone", tokens=args.tokens, ms=round(ms, 3),
           tflops=round(layer.flops(False) / (ms * 1e-3) / 1e12, 1))
    ms = timed_ms(layer.forward)
    record("whole layer", tokens=args.tokens, ms=round(ms, 3),
           tflops_products_only=round(layer.flops(False) / (ms * 1e-3) / 1e12, 1),
           tflops_with_attention=round(layer.flops(True) / (ms * 1e-3) / 1e12, 1))
    # Sustained: the whole layer back to back for --sustain-s, read in windows.
    end = time.monotonic() + args.sustain_s
    window = 0
    while time.monotonic() < end:
        t0 = time.monotonic()
        n = 0
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        while time.monotonic() - t0 < 5.0:
            for _ in range(10):
                layer.forward()
            n += 10
            torch.cuda.synchronize()
        b.record()
        b.synchronize()
        ms = a.elapsed_time(b) / n
        clock, power, temp = sm_clock_mhz()
        record("sustained", window=window, ms=round(ms, 3),
               tflops_with_attention=round(layer.flops(True) / (ms * 1e-3) / 1e12, 1),
               sm_clock_mhz=clock, power_w=power, temp_c=temp)
        window += 1
    with open(args.out, "w") as f:
        json.dump({"head": head, "records": RECORDS}, f, indent=1)
    log("done")


if __name__ == "__main__":
    main()
