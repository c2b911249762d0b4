#!/usr/bin/env python3
"""Times vLLM's Triton fused-MoE kernels (BF16 and block-scaled FP8 experts) on the GPU at hand.

Models whose experts are stored in BF16 or in FP8 with 128 x 128 block scales (GLM-4.6,
Qwen3-235B-A22B, DeepSeek-R1) run their routed experts on Hopper through vLLM's Triton kernel
`fused_moe_kernel`, with the tile sizes of vLLM's tuned tables (`fused_moe/configs/`, keyed by
experts, shard width, device and format) or its defaults. The simulator prices those experts
by a ceiling of the tensor peak (`moe_eff.bf16`, `moe_eff.fp8`, fitted on prefill-heavy public
reports) and their weights' stream; this probe measures the kernels, decode sizes included:

    python3 scripts/sim/fused_moe_probe.py --vllm VLLM_SRC --out probe.json [--budget-s 300]
        [--tokens 1,4,16,64,256,2048] [--sustain-s 12]

The kernel, its launcher and vLLM's config rules are read from the vLLM source tree given
(`vllm/model_executor/layers/fused_moe/fused_moe.py`, executed without importing vLLM; nothing
of vLLM is kept in this repository); tokens are routed uniformly at random and aligned to the
kernel's block as `moe_align_block_size` does; activations are quantized per 128-wide group
for FP8 (not timed); each timing replays the two expert products (gate/up, then down with the
routing weights) in a CUDA graph over several copies of the weights so that the L2 cache cannot
hold them.
"""

import argparse
import ast
import json
import os
import sys
import time
import traceback
from typing import Any, Optional

# (name, hidden, expert intermediate, experts, top-k, formats, tensor-parallel sizes)
# FP8 only where each shard's width is a multiple of the 128-wide scale blocks, as vLLM requires.
MODELS = [
    ("GLM-4.6", 5120, 1536, 160, 8, "bf16", (8,)),
    ("GLM-4.6", 5120, 1536, 160, 8, "fp8", (4,)),
    ("Qwen3-235B-A22B", 4096, 1536, 128, 8, "bf16", (4, 8)),
    ("Qwen3-235B-A22B", 4096, 1536, 128, 8, "fp8", (4,)),
    ("DeepSeek-R1", 7168, 2048, 256, 8, "fp8", (8,)),
]
TOKENS = [1, 4, 16, 64, 256, 2048]
START = time.monotonic()


def log(*args):
    print(f"[{time.monotonic() - START:6.1f}s]", *args, flush=True)


def load_vllm_functions(vllm):
    """vLLM's kernel, launcher and config rules, executed from its source with stand-ins for the
    few vLLM helpers they touch on this path."""
    import torch
    import triton
    import triton.language as tl

    path = os.path.join(vllm, "vllm/model_executor/layers/fused_moe/fused_moe.py")
    tree = ast.parse(open(path).read())
    wanted = {"write_zeros_to_output", "fused_moe_kernel", "invoke_fused_moe_kernel",
              "get_config_file_name", "get_default_config"}
    found = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in wanted]
    missing = wanted - {n.name for n in found}
    if missing:
        sys.exit(f"fused_moe_probe: {path} lacks {sorted(missing)}")

    class Platform:
        @staticmethod
        def get_device_name():
            return torch.cuda.get_device_name()

        @staticmethod
        def is_rocm():
            return False

    # Triton looks at a called kernel's module name: give the executed functions one.
    ns = {"__name__": "vllm_fused_moe", "torch": torch, "triton": triton, "tl": tl, "Any": Any,
          "Optional": Optional,
          "current_platform": Platform, "vllm_is_batch_invariant": lambda: False}
    module = ast.Module(body=found, type_ignores=[])
    code = compile(module, path, "exec")
    # Triton reads a jitted function's source from its file: keep the real path for it.
    exec(code, ns)
    return ns, os.path.join(os.path.dirname(path), "configs")


def pick_config(ns, configs_dir, m, experts, n, k, top_k, dtype, block):
    """The config vLLM uses for m tokens: the tuned table's entry nearest m, else its default."""
    name = ns["get_config_file_name"](experts, n, dtype, block)
    path = os.path.join(configs_dir, name)
    if os.path.exists(path):
        table = json.load(open(path))
        table.pop("triton_version", None)
        table = {int(key): v for key, v in table.items()}
        return dict(table[min(table, key=lambda x: abs(x - m))]), name
    return ns["get_default_config"](m, experts, n, k, top_k, dtype, block), None


def quantize_groups(x, group=128):
    """Per-token, per-128-column FP8 quantization (the activations of block-scaled FP8 experts)."""
    import torch

    m, k = x.shape
    g = x.float().view(m, k // group, group)
    scale = g.abs().amax(-1).clamp(min=1e-6) / 448.0
    q = (g / scale.unsqueeze(-1)).to(torch.float8_e4m3fn).view(m, k)
    return q, scale.contiguous()


class Shard:
    def __init__(self, hidden, inter, experts, tp, dtype, copies):
        import torch

        self.hidden, self.inter, self.experts = hidden, inter // tp, experts
        self.dtype, self.copies = dtype, copies
        n1, k1 = 2 * self.inter, hidden
        n2, k2 = hidden, self.inter
        if dtype == "bf16":
            make = lambda *s: torch.randn(*s, dtype=torch.bfloat16, device="cuda") * 0.02  # noqa: E731
        else:
            make = lambda *s: (torch.randn(*s, dtype=torch.bfloat16, device="cuda") * 0.5).to(torch.float8_e4m3fn)  # noqa: E731
        self.w1 = [make(experts, n1, k1) for _ in range(copies)]
        self.w2 = [make(experts, n2, k2) for _ in range(copies)]
        if dtype == "fp8":
            cd = lambda a: -(-a // 128)  # noqa: E731
            self.s1 = [torch.rand(experts, cd(n1), cd(k1), device="cuda") * 1e-2 for _ in range(copies)]
            self.s2 = [torch.rand(experts, cd(n2), cd(k2), device="cuda") * 1e-2 for _ in range(copies)]
        else:
            self.s1 = self.s2 = [None] * copies
        bytes_per = 2 if dtype == "bf16" else 1
        self.expert_bytes = 3 * hidden * self.inter * bytes_per


def time_point(ns, configs_dir, kp, sh, m, top_k, sustain_s=0.0):
    import torch
    import triton.language as tl

    dtype = "fp8_w8a8" if sh.dtype == "fp8" else None
    block = [128, 128] if sh.dtype == "fp8" else None
    cfg1, table = pick_config(ns, configs_dir, m, sh.experts, sh.inter, sh.hidden, top_k, dtype, block)
    block_m = cfg1["BLOCK_SIZE_M"]
    invoke = ns["invoke_fused_moe_kernel"]
    fp8 = sh.dtype == "fp8"
    calls, touched = [], []
    for r in range(sh.copies):
        x = torch.randn(m, sh.hidden, dtype=torch.bfloat16, device="cuda")
        logits = torch.randn(m, sh.experts, device="cuda")
        topw, topi = torch.topk(torch.softmax(logits, -1), top_k, dim=-1)
        topw = topw.float().contiguous()
        sorted_ids, eids, ntp, n_touched = kp.moe_align(topi, block_m, sh.experts)
        touched.append(n_touched)
        c1 = torch.empty(m, top_k, 2 * sh.inter, dtype=torch.bfloat16, device="cuda")
        c2 = torch.randn(m * top_k, sh.inter, dtype=torch.bfloat16, device="cuda")
        c3 = torch.empty(m, top_k, sh.hidden, dtype=torch.bfloat16, device="cuda")
        if fp8:
            a1, as1 = quantize_groups(x)
            a2, as2 = quantize_groups(c2)
        else:
            a1, as1, a2, as2 = x, None, c2, None

        def gate_up(r=r, a1=a1, as1=as1, c1=c1, s=sorted_ids, e=eids, n=ntp, w=topw):
            invoke(a1, sh.w1[r], c1, as1, sh.s1[r], None, w, s, e, n, False, top_k, cfg1, tl.bfloat16,
                   fp8, False, False, False, False, block)

        def down(r=r, a2=a2, as2=as2, c3=c3, s=sorted_ids, e=eids, n=ntp, w=topw):
            invoke(a2, sh.w2[r], c3, as2, sh.s2[r], None, w, s, e, n, True, 1, cfg1, tl.bfloat16,
                   fp8, False, False, False, False, block)

        calls.append((gate_up, down))
    both = [(lambda c=c: (c[0](), c[1]())) for c in calls]
    experts = kp.timed(both)
    around = around_the_products(kp, m, top_k, sh) if m >= 2048 else {}
    g1 = kp.timed([c[0] for c in calls])
    mean_touched = sum(touched) / len(touched)
    wbytes = mean_touched * sh.expert_bytes
    flops = 2.0 * m * top_k * 3 * sh.hidden * sh.inter
    return {"m": m, "config": cfg1, "tuned_table": table, "experts_touched": round(mean_touched, 2),
            "experts_us": experts["us"], "gate_up_us": g1["us"], "method": experts["method"],
            "weight_gb_per_s": round(wbytes / (experts["us"] * 1e-6) / 1e9, 1),
            "tflops": round(flops / (experts["us"] * 1e-6) / 1e12, 1),
            **around, **({"sustained": sustained(kp, both, sustain_s, flops)} if sustain_s > 0 else {})}


def around_the_products(kp, m, top_k, sh):
    """The memory-bound work between and after the two products at prefill sizes (recorded from
    2,048 tokens on), as torch ops of the same traffic as vLLM's kernels: SwiGLU over the
    gate/up output (read 2n, write n a row; torch's two kernels, vLLM fuses them) and the sum
    of each token's top-k down-product rows (read top_k rows, write one: `moe_sum`)."""
    import torch

    rot = 2
    up = [torch.randn(m * top_k, 2 * sh.inter, dtype=torch.bfloat16, device="cuda") for _ in range(rot)]
    down = [torch.randn(m, top_k, sh.hidden, dtype=torch.bfloat16, device="cuda") for _ in range(rot)]
    n = sh.inter
    act = kp.timed([(lambda x=x: torch.nn.functional.silu(x[:, :n]) * x[:, n:]) for x in up])
    combine = kp.timed([(lambda y=y: y.sum(dim=1)) for y in down])
    act_bytes = m * top_k * 3 * n * 2
    sum_bytes = m * (top_k + 1) * sh.hidden * 2
    return {"act_us": act["us"], "act_gb_per_s": round(act_bytes / (act["us"] * 1e-6) / 1e9, 1),
            "combine_us": combine["us"], "combine_gb_per_s": round(sum_bytes / (combine["us"] * 1e-6) / 1e9, 1)}


def sustained(kp, fns, seconds, flops):
    """Replays the products back to back for `seconds` (as a long prefill keeps the GPU busy) and
    reports each half second's mean time per call, TFLOP/s, SM clock and power draw: whether the
    rate holds or the clock falls under the power limit."""
    import torch

    graph, err = kp.capture_graph(fns)
    if graph is None:
        return [{"error": err}]
    windows, start = [], time.monotonic()
    while time.monotonic() - start < seconds:
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        n, t0 = 0, time.monotonic()
        a.record()
        while time.monotonic() - t0 < 0.5:
            graph.replay()
            n += 1
            if n % 8 == 0:
                torch.cuda.synchronize()
        b.record()
        b.synchronize()
        us = a.elapsed_time(b) * 1000.0 / (n * len(fns))
        try:
            clock, watts = torch.cuda.clock_rate(), torch.cuda.power_draw() / 1000.0
        except Exception:  # noqa: BLE001 - no NVML: the times alone
            clock, watts = None, None
        windows.append({"t_s": round(time.monotonic() - start, 1), "us": round(us, 1),
                        "tflops": round(flops / (us * 1e-6) / 1e12, 1), "sm_mhz": clock, "watts": watts})
    return windows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vllm", required=True, help="vLLM source tree")
    ap.add_argument("--out", required=True, help="JSON file to write")
    ap.add_argument("--budget-s", type=float, default=300.0, help="stop starting new points after this")
    ap.add_argument("--vllm-version", default="", help="recorded in the JSON's head")
    ap.add_argument("--sustain-s", type=float, default=0.0,
                    help="also replay the largest step size's products for this long (clock under load)")
    ap.add_argument("--tokens", default=",".join(map(str, TOKENS)),
                    help="step sizes to time, comma-separated (prefill chunks: 4096,8192)")
    args = ap.parse_args()
    import torch

    if not torch.cuda.is_available():
        sys.exit("fused_moe_probe: no CUDA device; this probe measures a GPU and needs one")
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import kernel_probe as kp
    import triton

    torch.set_grad_enabled(False)
    ns, configs_dir = load_vllm_functions(args.vllm)
    props = torch.cuda.get_device_properties(0)
    head = {"device": props.name, "sms": props.multi_processor_count, "torch": torch.__version__,
            "cuda": torch.version.cuda, "triton": triton.__version__, "vllm": args.vllm_version}
    log(head)
    records = []

    def save():
        with open(args.out, "w") as f:
            json.dump({"head": head, "records": records}, f, indent=1)

    for name, hidden, inter, experts, top_k, dtype, tps in MODELS:
        for tp in tps:
            base = {"model": name, "format": dtype, "tp": tp, "hidden": hidden,
                    "inter_shard": inter // tp, "experts": experts, "top_k": top_k}
            try:
                sh = Shard(hidden, inter, experts, tp, dtype, copies=4)
            except Exception as e:  # noqa: BLE001 - recorded, the others go on
                records.append({**base, "error": f"{type(e).__name__}: {e}"})
                save()
                continue
            sizes = [int(t) for t in args.tokens.split(",")]
            for m in sizes:
                if time.monotonic() - START > args.budget_s:
                    log("budget spent")
                    save()
                    return
                try:
                    hold = args.sustain_s if m == sizes[-1] else 0.0
                    rec = {**base, **time_point(ns, configs_dir, kp, sh, m, top_k, hold)}
                except Exception as e:  # noqa: BLE001 - one failed point must not lose the others
                    rec = {**base, "m": m, "error": f"{type(e).__name__}: {e}",
                           "trace": traceback.format_exc()[-1500:]}
                records.append(rec)
                log({k: v for k, v in rec.items() if k not in ("trace", "config", "sustained")})
                for w in rec.get("sustained", []):
                    log("  sustained", w)
                save()
            del sh
            torch.cuda.empty_cache()
    log("done")


if __name__ == "__main__":
    main()
