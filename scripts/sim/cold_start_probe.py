#!/usr/bin/env python3
"""What a cold process pays the first time it runs a prefill of a new size on the GPU.

A server that has served nothing (InferenceX starts one per point, and its client sent no test
prompt) meets its first wave with kernels it has not yet run: CUDA loads a kernel's module on its
first launch (`CUDA_MODULE_LOADING=LAZY`, the default since CUDA 12.2), cuBLAS picks its kernel
for a new shape by heuristics, and the caching allocator asks the driver for memory it has not
held. This probe times those first calls in fresh processes, after a warm-up like a server's
(every product at the decode sizes it captures, and once at the 8,192-token budget of its
profiling run), for the products of gpt-oss-120b's layer at TP 1 and 8 (and a wide square one),
the small ops around them, and fresh allocations. Each case runs in its own process, once with
lazy loading and once with eager loading, whose difference is the loading itself; then, in one
more process, the two widest products at new row counts one after another (`sequence`), which
tells a first call that runs a kernel not yet run from one that only meets a new shape.

Usage: python3 scripts/sim/cold_start_probe.py --out probe.json   (a GPU with PyTorch; ~2 min)
"""

import argparse
import json
import os
import subprocess
import sys
import time

# (name, K, N): gpt-oss-120b's dense products (hidden 2,880; 64 query and 8 key-value heads of
# 64; 128 experts' router) at TP 1 and TP 8, and a square one.
SHAPES = [
    ("qkv_tp1", 2880, 5120),
    ("o_tp1", 4096, 2880),
    ("router", 2880, 128),
    ("qkv_tp8", 2880, 640),
    ("o_tp8", 512, 2880),
    ("square_8k", 8192, 8192),
]
WARM_M = [1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 8192]
COLD_M = [3700, 1000, 2085, 6001]


def timed(fn) -> float:
    """Wall time of one call, microseconds, the GPU synchronised either side."""
    import torch

    torch.cuda.synchronize()
    t = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) * 1e6


def first_and_warm(fn) -> tuple:
    """A call's first wall time and the median of five calls after it, microseconds."""
    first = timed(fn)
    return first, sorted(timed(fn) for _ in range(5))[2]


def child(mode: str) -> dict:
    import torch

    t_import = time.perf_counter()
    dev = torch.device("cuda")
    torch.cuda.init()
    torch.zeros(1, device=dev)
    torch.cuda.synchronize()
    init_s = time.perf_counter() - t_import

    weights = {name: torch.randn(k, n, device=dev, dtype=torch.bfloat16) for name, k, n in SHAPES}

    def small_ops(m):
        x = torch.randn(m, 2880, device=dev, dtype=torch.bfloat16)
        logits = torch.randn(m, 128, device=dev, dtype=torch.float32)
        gate = torch.randn(m, 5760, device=dev, dtype=torch.bfloat16)
        return [
            ("rmsnorm", lambda: x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6).to(x.dtype)),
            ("softmax_topk", lambda: torch.topk(torch.softmax(logits, -1), 4, dim=-1)),
            ("swiglu", lambda: torch.nn.functional.silu(gate[:, :2880]) * gate[:, 2880:]),
        ]

    # A server's warm-up: every product at the captured decode sizes and the profiling budget.
    for m in WARM_M:
        for name, k, n in SHAPES:
            a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
            timed(lambda: a @ weights[name])
        for _, fn in small_ops(m):
            timed(fn)
    records = []
    for m in COLD_M:
        for name, k, n in SHAPES:
            a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
            first, warm = first_and_warm(lambda: a @ weights[name])
            records.append({"op": name, "m": m, "first_us": first, "warm_us": warm})
        for name, fn in small_ops(m):
            first, warm = first_and_warm(fn)
            records.append({"op": name, "m": m, "first_us": first, "warm_us": warm})
    # Fresh device memory: the caching allocator asks the driver for blocks it has not held.
    allocs = []
    for mb in [64, 256, 1024]:
        torch.cuda.empty_cache()
        first = timed(lambda: torch.empty(mb << 20, dtype=torch.uint8, device=dev))
        cached = timed(lambda: torch.empty(mb << 20, dtype=torch.uint8, device=dev))
        allocs.append({"mb": mb, "fresh_us": first, "cached_us": cached})
    return {"mode": mode, "init_s": init_s, "records": records, "allocs": allocs}


# Products at new row counts one after another in one process (warmed at powers of two to 512
# rows and at 8,192): which first calls pay for a kernel cuBLAS has not yet run, and which only
# for a new shape.
SEQUENCE_M = [3700, 3701, 3702, 3716, 3800, 4000, 4096, 5000, 3700, 6001, 6002, 7000, 1000, 1001, 1500, 2085, 2086]


def sequence() -> list:
    import torch

    dev = torch.device("cuda")

    w = {name: torch.randn(k, n, device=dev, dtype=torch.bfloat16) for name, k, n in SHAPES[:2]}
    for m in [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 8192]:
        for b in w.values():
            a = torch.randn(m, b.shape[0], device=dev, dtype=torch.bfloat16)
            timed(lambda: a @ b)
    out = []
    for m in SEQUENCE_M:
        for name, b in w.items():
            a = torch.randn(m, b.shape[0], device=dev, dtype=torch.bfloat16)
            first, warm = first_and_warm(lambda: a @ b)
            out.append({"op": name, "m": m, "first_us": round(first, 1), "warm_us": round(warm, 1)})
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--child", default=None)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(sequence() if args.child == "SEQUENCE" else child(args.child)))
        return
    import torch

    head = {
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "warm_m": WARM_M,
        "cold_m": COLD_M,
    }
    runs = []
    for mode in ["LAZY", "EAGER", "LAZY"]:
        env = dict(os.environ, CUDA_MODULE_LOADING=mode)
        t = time.perf_counter()
        p = subprocess.run(
            [sys.executable, __file__, "--out", "-", "--child", mode],
            env=env, capture_output=True, text=True, timeout=240,
        )
        if p.returncode != 0:
            runs.append({"mode": mode, "error": p.stderr[-2000:]})
            print(mode, "failed:", p.stderr[-500:], flush=True)
            continue
        run = json.loads(p.stdout.strip().splitlines()[-1])
        run["wall_s"] = time.perf_counter() - t
        runs.append(run)
        extra = sum(r["first_us"] - r["warm_us"] for r in run["records"] if r["m"] == COLD_M[0])
        print(f"{mode}: init {run['init_s']:.1f} s; first calls at {COLD_M[0]} rows, excess over warm "
              f"{extra / 1000:.2f} ms in all", flush=True)
        for r in run["records"]:
            print(f"  {r['op']:<13} m={r['m']:<5} first {r['first_us']:9.1f} us  warm {r['warm_us']:8.1f} us", flush=True)
        for a in run["allocs"]:
            print(f"  alloc {a['mb']:>5} MB  fresh {a['fresh_us']:8.1f} us  cached {a['cached_us']:6.1f} us", flush=True)
    p = subprocess.run(
        [sys.executable, __file__, "--out", "-", "--child", "SEQUENCE"], capture_output=True, text=True, timeout=240
    )
    seq = json.loads(p.stdout.strip().splitlines()[-1]) if p.returncode == 0 else {"error": p.stderr[-2000:]}
    for r in seq if isinstance(seq, list) else []:
        print(f"  sequence {r['op']:<8} m={r['m']:<5} first {r['first_us']:8.1f} us  warm {r['warm_us']:7.1f} us", flush=True)
    with open(args.out, "w") as f:
        json.dump({"head": head, "runs": runs, "sequence": seq}, f, indent=1)


if __name__ == "__main__":
    main()
