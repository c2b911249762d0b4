#!/usr/bin/env python3
"""Times the kernels of one gpt-oss-120b decoder layer on the GPU at hand.

The simulator's stack constants (crates/sim/presets/hardware/CALIBRATION.md) were fitted on
whole-server reports; this probe measures the parts one by one on a real GPU, so that a term of
the cost model can be checked against the kernel it stands for:

- the streaming bandwidth a plain copy reaches (eta_bw);
- the floor of a small kernel inside a CUDA graph (t_layer_us holds about nine of them);
- cuBLAS BF16 products of the layer's dense shapes (QKV, output, router, LM head) at tensor-parallel
  shard sizes 1, 2, 4 and 8 and from 1 to 8192 rows (gemm_eff, gemm_m_half);
- whether those kernels add up: a layer's products and MoE back to back in one graph against
  the sum of their times alone;
- BF16 and FP8 products of large dense models' shapes (Llama-3.1-70B, Qwen3-32B) from 16 to
  16384 rows, FP8 through `torch._scaled_mm` (the format ceilings gemm_eff.bf16 and .fp8);
- the routed experts as vLLM's Triton backend runs MXFP4 checkpoints on Hopper: BF16 activations
  times MXFP4 weights through triton_kernels (top-k routing, the gate/up product with SwiGLU
  fused, the down product, the combine), split-K fixed at 1 as vLLM sets it, at the same shard
  sizes and step sizes (the `triton_moe` constants and the per-layer routing cost t_moe_us).
  Both of triton_kernels' APIs work: `matmul` (December 2025 on) and `matmul_ogs` with
  `routing` (before; what vLLM calls).
- decode attention through torch's fused SDPA over contiguous BF16 caches of the layer's heads
  at TP 1 and 8, 1 to 256 sequences of 1,024 to 8,192 tokens (the KV cache's stream, eta_bw).

Every time is of kernels replayed in a CUDA graph (as vLLM decodes), over inputs rotated so that
the L2 cache does not hold the weights between calls; where a graph cannot be captured the time
is the sum of the kernels' own durations from the profiler, and the record says which.

Usage (needs PyTorch with CUDA; the MoE part also needs triton_kernels on the path, the package
of that name in the Triton repository, python/triton_kernels, matching the installed Triton):

    python3 scripts/sim/kernel_probe.py --out probe.json [--triton-kernels DIR] [--budget-s 420]
        [--sections moe,floor,bandwidth,dense,fp8,chain,attention] [--experts 32]

The JSON holds the device, the library versions and one record per measurement; a section that
fails records its error and the rest go on.
"""

import argparse
import json
import sys
import time
import traceback

import torch

# gpt-oss-120b's shapes (config.json): hidden 2880, 64 query heads and 8 KV heads of 64,
# 128 experts of intermediate 2880 with 4 active, vocabulary 201088 (`--experts 32`: gpt-oss-20b's
# experts, the same shapes otherwise).
HIDDEN = 2880
HEAD_DIM = 64
Q_HEADS = 64
KV_HEADS = 8
EXPERTS = 128
TOP_K = 4
INTERMEDIATE = 2880
VOCAB = 201088

RECORDS = []
START = time.monotonic()


def log(*args):
    print(f"[{time.monotonic() - START:6.1f}s]", *args, flush=True)


def record(section, **fields):
    fields["section"] = section
    RECORDS.append(fields)
    log(section, {k: v for k, v in fields.items() if k != "section" and k != "kernels"})


def round_up(x, m):
    return (x + m - 1) // m * m


def moe_align(topk_ids, block, experts):
    """moe_align_block_size's output, as vLLM hands it to its MoE kernels (Marlin's and the
    Triton fused-MoE's): token slots sorted by expert, each expert's run padded to the block,
    the array sized as vLLM sizes it (every expert may need a partial block); the expert of each
    block (-1 past the last); the padded count; and how many experts were touched."""
    flat = topk_ids.flatten().cpu()
    numel = flat.numel()
    cap = numel + experts * (block - 1)
    sorted_ids = torch.full((cap,), numel, dtype=torch.int32)
    expert_ids = torch.full(((cap + block - 1) // block,), -1, dtype=torch.int32)
    order = torch.argsort(flat, stable=True)
    counts = torch.bincount(flat, minlength=experts)
    pos, src = 0, 0
    for e in range(experts):
        c = int(counts[e])
        if c == 0:
            continue
        sorted_ids[pos:pos + c] = order[src:src + c].to(torch.int32)
        blocks = -(-c // block)
        expert_ids[pos // block:pos // block + blocks] = e
        pos += blocks * block
        src += c
    return sorted_ids.cuda(), expert_ids.cuda(), torch.tensor([pos], dtype=torch.int32).cuda(), \
        int((counts > 0).sum())


def capture_graph(fns, inner=1):
    """The fns, run once on the current stream and once on a side stream (warm-up, as capture
    requires), then captured `inner` times over in one CUDA graph: (graph, None), or (None,
    the error) if capture fails."""
    for f in fns:
        f()
    torch.cuda.synchronize()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for f in fns:
            f()
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            for _ in range(inner):
                for f in fns:
                    f()
    except Exception as e:  # noqa: BLE001 - a capture failure is a finding, not a crash
        torch.cuda.synchronize()
        return None, f"{type(e).__name__}: {e}"
    return graph, None


def graph_time_us(fns, reps=20, inner=4):
    """Mean time of one call, replaying every fn `inner` times per graph; None if capture fails."""
    graph, err = capture_graph(fns, inner)
    if graph is None:
        return None, err
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        graph.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1000.0 / (reps * inner * len(fns)), None


def profiled(fns, reps=10):
    """The profiler's kernel events over `reps` rounds of the fns (after one warm-up round),
    and the number of calls they cover."""
    from torch.profiler import ProfilerActivity, profile

    for f in fns:
        f()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            for f in fns:
                f()
        torch.cuda.synchronize()
    return prof.key_averages(), reps * len(fns)


def kernel_sum_us(fns, reps=10):
    """Mean sum of the kernels' own durations per call, and the top kernels, from the profiler."""
    events, calls = profiled(fns, reps)
    kernels = {}
    for evt in events:
        t = getattr(evt, "self_device_time_total", 0) or 0
        if t > 0:
            kernels[evt.key[:80]] = round(t / calls, 2)
    total = sum(kernels.values())
    top = dict(sorted(kernels.items(), key=lambda kv: -kv[1])[:8])
    return total, top


def timed(fns, want_kernels=False):
    us, err = graph_time_us(fns)
    out = {"us": round(us, 2) if us is not None else None, "method": "cuda graph"}
    if us is None:
        out["graph_error"] = err[:300]
    if us is None or want_kernels:
        ks, top = kernel_sum_us(fns)
        out["kernel_sum_us"] = round(ks, 2)
        out["kernels"] = top
        if us is None:
            out["us"] = round(ks, 2)
            out["method"] = "profiler kernel sum"
    return out


def over_budget(args):
    return time.monotonic() - START > args.budget_s


# ----------------------------------------------------------------------------------------------
def probe_bandwidth(args):
    n = 1 << 30  # 1 GiB of bf16 per buffer
    a = torch.empty(n // 2, dtype=torch.bfloat16, device="cuda").normal_()
    b = torch.empty_like(a)
    t = timed([lambda: b.copy_(a)])
    gbs = 2 * n / (t["us"] * 1e-6) / 1e9
    record("bandwidth", what="device-to-device copy of 1 GiB, bytes read and written", **t,
           gb_per_s=round(gbs, 1))
    t = timed([lambda: torch.sum(a, dtype=torch.float32)])
    record("bandwidth", what="sum of 1 GiB (reads only)", **t,
           gb_per_s=round(n / (t["us"] * 1e-6) / 1e9, 1))
    del a, b


def probe_floor(args):
    x = torch.zeros(1, device="cuda")
    for chain in (1, 16, 64):
        fns = [lambda: x.add_(1.0)] * chain
        t = timed(fns)
        record("kernel floor", what="one-element add, back to back in a graph", chain=chain, **t)
    # a small GEMM's floor: 1 row through a 2880 x 128 router
    w = torch.randn(HIDDEN, EXPERTS, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(1, HIDDEN, device="cuda", dtype=torch.bfloat16)
    t = timed([lambda: v @ w])
    record("kernel floor", what="1 x 2880 x 128 bf16 product (router at batch 1)", **t)


def dense_shapes(tp):
    q = (Q_HEADS + 2 * KV_HEADS) * HEAD_DIM
    return {
        "qkv": (HIDDEN, q // tp),
        "o_proj": (Q_HEADS * HEAD_DIM // tp, HIDDEN),
        "router": (HIDDEN, EXPERTS),
        "lm_head": (HIDDEN, VOCAB // tp),
    }


def probe_dense(args):
    ms = [1, 4, 16, 64, 256, 1024, 4096, 8192]
    for tp in (1, 2, 4, 8):
        for name, (k, n) in dense_shapes(tp).items():
            if name == "router" and tp > 1:
                continue
            wbytes = k * n * 2
            rot = max(1, min(16, (256 << 20) // wbytes + 1))
            ws = [torch.randn(k, n, device="cuda", dtype=torch.bfloat16) for _ in range(rot)]
            for m in ms:
                if over_budget(args):
                    return
                if name == "lm_head" and m > 256:
                    continue
                if tp in (2, 4) and m not in (4, 64, 1024):
                    continue
                x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
                fns = [(lambda w=w: x @ w) for w in ws]
                t = timed(fns)
                flops = 2.0 * m * k * n
                record("dense", shape=name, tp=tp, m=m, k=k, n=n, **t,
                       tflops=round(flops / (t["us"] * 1e-6) / 1e12, 1),
                       weight_gb_per_s=round(wbytes / (t["us"] * 1e-6) / 1e9, 1))
            del ws
            torch.cuda.empty_cache()


# ----------------------------------------------------------------------------------------------
def quantize_mxfp4(w):
    """MXFP4 values and scales of `w` (experts, k, n) along k, in the device's swizzled layout."""
    from triton_kernels.numerics_details.mxfp import downcast_to_mxfp
    from triton_kernels.tensor import FP4, convert_layout, wrap_torch_tensor
    from triton_kernels.tensor_details import layout

    wq, scale = downcast_to_mxfp(w, torch.uint8, axis=1)
    vl, vlo = layout.make_default_matmul_mxfp4_w_layout(mx_axis=1)
    sl, slo = layout.make_default_matmul_mxfp4_w_scale_layout(mx_axis=1, num_warps=8)
    wq = convert_layout(wrap_torch_tensor(wq, dtype=FP4), vl, **vlo)
    scale = convert_layout(wrap_torch_tensor(scale), sl, **slo)
    return wq, scale


class Moe:
    """One MoE layer of gpt-oss-120b at one tensor-parallel shard, MXFP4 weights, BF16
    activations, through triton_kernels' `matmul` API (December 2025 on)."""

    api = "matmul"

    def __init__(self, tp):
        self.tp = tp
        self.inter = round_up(INTERMEDIATE // tp, 64)
        dev = "cuda"
        w1 = torch.randn(EXPERTS, HIDDEN, 2 * self.inter, device=dev, dtype=torch.bfloat16) * 0.02
        self.w1, s1 = quantize_mxfp4(w1)
        del w1
        w2 = torch.randn(EXPERTS, self.inter, HIDDEN, device=dev, dtype=torch.bfloat16) * 0.02
        self.w2, s2 = quantize_mxfp4(w2)
        del w2
        torch.cuda.empty_cache()
        self.b1 = torch.zeros(EXPERTS, 2 * self.inter, device=dev, dtype=torch.float32)
        self.b2 = torch.zeros(EXPERTS, HIDDEN, device=dev, dtype=torch.float32)
        self.precision(s1, s2)
        # bytes of one expert's weights (4-bit values plus one 8-bit scale per 32)
        self.expert_bytes = (HIDDEN * 2 * self.inter + self.inter * HIDDEN) * (0.5 + 1 / 32)

    def precision(self, s1, s2):
        import triton_kernels.swiglu
        from triton_kernels.matmul import FlexCtx, FnSpecs, FusedActivation, PrecisionConfig
        from triton_kernels.numerics import InFlexData

        self.pc1 = PrecisionConfig(flex_ctx=FlexCtx(rhs_data=InFlexData()), b_mx_scale=s1)
        self.pc2 = PrecisionConfig(flex_ctx=FlexCtx(rhs_data=InFlexData()), b_mx_scale=s2)
        self.act = FusedActivation(
            FnSpecs("swiglu", triton_kernels.swiglu.swiglu_fn, ("alpha", "limit"), reduction_n=2),
            (1.702, 7.0))

    def route(self, logits):
        from triton_kernels.tensor import make_ragged_tensor_metadata
        from triton_kernels.topk import topk

        sparse = topk(logits, TOP_K, apply_softmax=True)
        dispatch = sparse.mask_metadata.row_sorted_indx
        combine = sparse.mask_metadata.col_sorted_indx
        meta = make_ragged_tensor_metadata(sparse.mask_metadata.col_sum, dispatch.shape[0])
        return meta, combine // TOP_K, combine

    def experts(self, x, routed):
        from triton_kernels.matmul import matmul

        meta, gather, scatter = routed
        h = matmul(x, self.w1, self.b1, meta, gather_indx=gather, precision_config=self.pc1,
                   fused_activation=self.act)
        return matmul(h, self.w2, self.b2, meta, scatter_indx=scatter, precision_config=self.pc2)

    def combine(self, y, m):
        from triton_kernels.reduce import reduce

        z, _ = reduce(y.view(m, TOP_K, HIDDEN), dim=1)
        return z

    def layer(self, x, logits):
        m = x.shape[0]
        return self.combine(self.experts(x, self.route(logits)), m)


class OgsMoe(Moe):
    """The same layer through the `matmul_ogs` and `routing` API of triton_kernels up to late
    2025, as vLLM's Triton backend calls it (the down product's scatter weighs and sums the
    experts' rows itself)."""

    api = "matmul_ogs"

    def precision(self, s1, s2):
        import triton_kernels.swiglu
        from triton_kernels.matmul_ogs import FlexCtx, FnSpecs, FusedActivation, PrecisionConfig
        from triton_kernels.numerics import InFlexData

        self.pc1 = PrecisionConfig(flex_ctx=FlexCtx(rhs_data=InFlexData()), weight_scale=s1)
        self.pc2 = PrecisionConfig(flex_ctx=FlexCtx(rhs_data=InFlexData()), weight_scale=s2)
        self.act = FusedActivation(
            FnSpecs("swiglu", triton_kernels.swiglu.swiglu_fn, ("alpha", "limit")), (1.702, 7.0), 2)

    def route(self, logits):
        from triton_kernels.routing import routing

        return routing(logits, TOP_K, sm_first=False)

    def experts(self, x, routed):
        from triton_kernels.matmul_ogs import matmul_ogs

        rdata, gather, scatter = routed
        h = matmul_ogs(x, self.w1, self.b1, rdata, gather_indx=gather, precision_config=self.pc1,
                       fused_activation=self.act)
        return matmul_ogs(h, self.w2, self.b2, rdata, scatter_indx=scatter, precision_config=self.pc2,
                          gammas=rdata.gate_scal)

    def combine(self, y, m):
        return y


def experts_touched(m):
    # expected distinct experts under uniform routing: E (1 - (1 - k/E)^m)
    return EXPERTS * (1.0 - (1.0 - TOP_K / EXPERTS) ** m)


def moe_kind(args):
    """The MoE class for the triton_kernels on the path (its API), with the kernels' options as
    vLLM sets them: split-K fixed at 1 on Hopper (`_swizzle_mxfp4`), where the kernels' own
    heuristics would split small products over K and add reduction kernels. Returns the class
    and the constraints set."""
    if args.triton_kernels and args.triton_kernels not in sys.path:
        sys.path.insert(0, args.triton_kernels)
    import importlib
    import importlib.util

    kind = OgsMoe if importlib.util.find_spec("triton_kernels.routing") else Moe
    constrained = {}
    if torch.cuda.get_device_capability()[0] == 9:
        flags = "triton_kernels.matmul_ogs_details.opt_flags" if kind is OgsMoe else "triton_kernels.matmul_details.opt_flags"
        constrained = {"split_k": 1}
        importlib.import_module(flags).update_opt_flags_constraints(constrained)
    return kind, constrained


def probe_moe(args):
    import triton

    kind, constrained = moe_kind(args)
    record("moe setup", triton=triton.__version__, api=kind.api, constraints=constrained)
    ms_all = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192]
    for tp in (1, 8, 2, 4):
        if over_budget(args):
            return
        moe = kind(tp)
        ms = ms_all if tp in (1, 8) else [1, 4, 16, 64, 256, 1024, 4096]
        for m in ms:
            if over_budget(args):
                break
            rot = 4
            xs = [torch.randn(m, HIDDEN, device="cuda", dtype=torch.bfloat16) for _ in range(rot)]
            ls = [torch.randn(m, EXPERTS, device="cuda", dtype=torch.float32) for _ in range(rot)]
            want = tp == 1 and m in (4, 64, 1024)
            full = timed([(lambda x=x, l=l: moe.layer(x, l)) for x, l in zip(xs, ls)], want)
            routed = [moe.route(l) for l in ls]
            mm = timed([(lambda x=x, r=r: moe.experts(x, r)) for x, r in zip(xs, routed)])
            touched = experts_touched(m)
            wbytes = touched * moe.expert_bytes
            flops = 2.0 * m * TOP_K * (HIDDEN * 2 * moe.inter + moe.inter * HIDDEN)
            record("moe", tp=tp, m=m, inter=moe.inter, experts_touched=round(touched, 1),
                   layer=full, experts_only=mm,
                   weight_gb_per_s=round(wbytes / (mm["us"] * 1e-6) / 1e9, 1),
                   tflops=round(flops / (mm["us"] * 1e-6) / 1e12, 1))
        del moe
        torch.cuda.empty_cache()


def probe_fp8(args):
    """Dense BF16 and FP8 products of large models' shapes (cuBLAS; FP8 through
    `torch._scaled_mm` with per-tensor scales): the format ceilings `gemm_eff.bf16` and
    `gemm_eff.fp8` and the rows at which a product reaches half of them (`gemm_m_half`)."""
    shapes = {"llama-70b up+gate": (8192, 57344), "llama-70b down": (28672, 8192),
              "llama-70b qkv": (8192, 10240), "qwen3-32b up+gate": (5120, 51200)}
    one = torch.ones((), device="cuda", dtype=torch.float32)
    for name, (k, n) in shapes.items():
        wbf = [torch.randn(n, k, device="cuda", dtype=torch.bfloat16) for _ in range(2)]
        w8 = [w.to(torch.float8_e4m3fn) for w in wbf]
        for m in (16, 64, 256, 1024, 4096, 8192, 16384):
            if over_budget(args):
                return
            x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            x8 = x.to(torch.float8_e4m3fn)
            flops = 2.0 * m * k * n
            for fmt, fns in (
                ("bf16", [(lambda w=w: x @ w.t()) for w in wbf]),
                ("fp8", [(lambda w=w: torch._scaled_mm(x8, w.t(), scale_a=one, scale_b=one,
                                                        out_dtype=torch.bfloat16)) for w in w8]),
            ):
                t = timed(fns)
                record("dense formats", shape=name, format=fmt, m=m, k=k, n=n, **t,
                       tflops=round(flops / (t["us"] * 1e-6) / 1e12, 1))
        del wbf, w8
        torch.cuda.empty_cache()


def probe_chain(args):
    """Whether the kernels of a layer add up: the QKV, output and router products and the MoE
    (Triton, as above) timed one by one and back to back in one graph, at TP 1 and 8."""
    kind, _ = moe_kind(args)
    for tp in (1, 8):
        moe = kind(tp)
        shapes = dense_shapes(tp)
        rot = 4
        ws = {name: [torch.randn(*shapes[name], device="cuda", dtype=torch.bfloat16) for _ in range(rot)]
              for name in ("qkv", "o_proj", "router")}
        for m in (4, 64):
            if over_budget(args):
                return
            xs = [torch.randn(m, HIDDEN, device="cuda", dtype=torch.bfloat16) for _ in range(rot)]
            ys = [torch.randn(m, shapes["o_proj"][0], device="cuda", dtype=torch.bfloat16) for _ in range(rot)]
            ls = [torch.randn(m, EXPERTS, device="cuda", dtype=torch.float32) for _ in range(rot)]
            parts = {
                "qkv": [(lambda i=i: xs[i] @ ws["qkv"][i]) for i in range(rot)],
                "o_proj": [(lambda i=i: ys[i] @ ws["o_proj"][i]) for i in range(rot)],
                "router": [(lambda i=i: xs[i] @ ws["router"][i]) for i in range(rot)],
                "moe": [(lambda i=i: moe.layer(xs[i], ls[i])) for i in range(rot)],
            }
            alone = {name: timed(fns)["us"] for name, fns in parts.items()}

            def layer(i):
                for fns in parts.values():
                    fns[i]()

            chain = timed([(lambda i=i: layer(i)) for i in range(rot)])["us"]
            record("chain", tp=tp, m=m, alone=alone, sum_us=round(sum(alone.values()), 2), chain_us=chain)
        del moe, ws
        torch.cuda.empty_cache()


def probe_attention(args):
    """Decode attention (one query token a sequence) through torch's fused SDPA over contiguous
    BF16 caches of gpt-oss's heads, at TP 1 (64 query heads, 8 KV heads) and TP 8 (8 and 1):
    the KV cache's stream against the bandwidth term. The first six points are the grid of the
    earliest runs; the rest extend it to the batches and contexts of InferenceX's long runs."""
    import torch.nn.functional as F

    grid = [(1, 1, 1024), (1, 4, 1024), (1, 16, 1024), (1, 64, 1024), (1, 4, 8192), (1, 64, 8192)]
    grid += [(tp, b, ctx) for tp in (1, 8) for ctx in (1024, 4096, 8192) for b in (1, 16, 64, 128, 256)
             if (tp, b, ctx) not in grid]
    for tp, b, ctx in grid:
        if over_budget(args):
            return
        qh, kvh = Q_HEADS // tp, KV_HEADS // tp
        q = torch.randn(b, qh, 1, HEAD_DIM, device="cuda", dtype=torch.bfloat16)
        ks = [torch.randn(b, kvh, ctx, HEAD_DIM, device="cuda", dtype=torch.bfloat16)
              for _ in range(2)]
        vs = [torch.randn_like(k) for k in ks]
        fns = [(lambda k=k, v=v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True))
               for k, v in zip(ks, vs)]
        t = timed(fns, want_kernels=True)
        kv_bytes = 2 * b * kvh * ctx * HEAD_DIM * 2
        record("attention (torch sdpa)", tp=tp, batch=b, context=ctx, **t,
               kv_gb_per_s=round(kv_bytes / (t["us"] * 1e-6) / 1e9, 1))
        del q, ks, vs
        torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="JSON file to write")
    ap.add_argument("--triton-kernels", help="folder holding the triton_kernels package")
    ap.add_argument("--budget-s", type=float, default=420.0, help="stop starting new measurements after this")
    ap.add_argument("--sections", default="moe,floor,bandwidth,dense,fp8,chain,attention")
    ap.add_argument("--experts", type=int, default=128, help="routed experts a layer (32: gpt-oss-20b)")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("kernel_probe: no CUDA device; this probe measures a GPU and needs one")
    globals()["EXPERTS"] = args.experts
    torch.set_grad_enabled(False)
    props = torch.cuda.get_device_properties(0)
    head = {"device": props.name, "sms": props.multi_processor_count, "experts": EXPERTS,
            "memory_gib": round(props.total_memory / 2**30, 1), "torch": torch.__version__,
            "cuda": torch.version.cuda}
    log(head)
    probes = {"bandwidth": probe_bandwidth, "floor": probe_floor, "moe": probe_moe,
              "dense": probe_dense, "fp8": probe_fp8, "chain": probe_chain, "attention": probe_attention}

    def save():
        with open(args.out, "w") as f:
            json.dump({"head": head, "records": RECORDS}, f, indent=1)

    for name in args.sections.split(","):
        try:
            probes[name](args)
        except Exception as e:  # noqa: BLE001 - one failed section must not lose the others
            record(name, error=f"{type(e).__name__}: {e}", trace=traceback.format_exc()[-2000:])
        save()
    log("done")


if __name__ == "__main__":
    main()
