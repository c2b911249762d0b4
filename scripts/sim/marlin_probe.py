#!/usr/bin/env python3
"""Times vLLM's Marlin MoE kernels on MXFP4 experts (gpt-oss-120b's shapes) on the GPU at hand.

InferenceX's gpt-oss-120b runs on Hopper set `VLLM_MXFP4_USE_MARLIN=1`: their routed experts run
through vLLM's `moe_wna16_marlin_gemm` (BF16 activations times MXFP4 weights, dequantized in
registers). The simulator prices those experts as a stream of their weights at `eta_bw` of the
memory's bandwidth (CALIBRATION.md, fitted on the H100). Whether that stream follows the memory
to an H200 (43 % more bandwidth, the same SMs) or is held back by the SMs' dequantizing, as
the Triton backend's is (`kernel_probe.py`), decides the H200's decode. This probe builds the
kernels from a vLLM source tree (nothing of vLLM is kept in this repository) and times them:

    python3 scripts/sim/marlin_probe.py build --vllm VLLM_SRC --out-dir BUILD [--nvcc NVCC]
    python3 scripts/sim/marlin_probe.py run --lib BUILD/marlin_probe.so --out probe.json

`build` needs nvcc and PyTorch's headers (it may run on a machine without a GPU); `run` needs
PyTorch with CUDA on a Hopper (or Ampere) GPU. Shapes are vLLM's for the Marlin backend: the
hidden size padded to 3,072 and each shard's expert intermediate size to a multiple of 128
(`mxfp4.py`), the block size of the token-to-expert alignment chosen as
`fused_marlin_moe` chooses it, FP32 reduction, no atomics. Each timing replays the two expert
products (and, apart, the products with the activation and the top-k sum between them) in a
CUDA graph over several copies of the weights, so that the L2 cache cannot hold them.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
import traceback

HIDDEN = 2880
INTERMEDIATE = 2880
EXPERTS = 128
TOP_K = 4
START = time.monotonic()


def log(*args):
    print(f"[{time.monotonic() - START:6.1f}s]", *args, flush=True)


def round_up(x, m):
    return (x + m - 1) // m * m


# ----------------------------------------------------------------------------------------------
# build
REGISTRATION = """#pragma once
// The two macros of vLLM's core/registration.h that ops.cu uses, without its Python module.
#define _CONCAT(A, B) A##B
#define CONCAT(A, B) _CONCAT(A, B)
#define TORCH_LIBRARY_EXPAND(NAME, MODULE) TORCH_LIBRARY(NAME, MODULE)
#define TORCH_LIBRARY_IMPL_EXPAND(NAME, DEVICE, MODULE) TORCH_LIBRARY_IMPL(NAME, DEVICE, MODULE)
"""

BIND = """// The operator's schema as vLLM declares it, under this probe's own namespace.
#include <torch/library.h>
#include "core/scalar_type.hpp"

TORCH_LIBRARY(marlin_probe, m) {
  m.def(SCHEMA);
  m.def("fe2m1f_id() -> int", []() -> int64_t { return vllm::kFE2M1f.id(); });
}
"""


def schema(vllm):
    """The schema string of moe_wna16_marlin_gemm from vLLM's torch_bindings.cpp (its adjacent
    string literals joined)."""
    text = open(os.path.join(vllm, "csrc/moe/torch_bindings.cpp")).read()
    m = re.search(r'm\.def\(\s*((?:"[^"]*"\s*)+)\)', text[text.index('"moe_wna16_marlin_gemm(') - 40:])
    if not m:
        sys.exit("marlin_probe: no moe_wna16_marlin_gemm schema in csrc/moe/torch_bindings.cpp")
    return "".join(re.findall(r'"([^"]*)"', m.group(1)))


def filter_selector(path):
    """Keeps the BF16-activation FP4-weight kernels of the generated kernel_selector.h (the
    others are not compiled here)."""
    lines = open(path).read().splitlines()
    kept, i = [], 0
    while i < len(lines):
        line = lines[i]
        if line.startswith(("if (", "else if (")):
            cond, body = line, lines[i + 1]
            if "a_type == vllm::kBFloat16" in cond and "b_type == vllm::kFE2M1f" in cond:
                cond = cond.replace("else if (", "if (", 1)
                kept.append(("else " if kept else "") + cond)
                kept.append(body)
            i += 2
        else:
            i += 1
    if not kept:
        sys.exit("marlin_probe: the generated kernel_selector.h has no BF16 x FP4 kernels")
    with open(path, "w") as f:
        f.write("\n".join(kept) + "\n")
    return len(kept) // 2


def torch_dirs():
    """PyTorch's header and library folders, found without importing it (a build machine
    without a GPU may lack the libraries torch loads at import)."""
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.origin:
        sys.exit("marlin_probe: PyTorch is not installed (its headers are needed)")
    root = os.path.dirname(spec.origin)
    inc = os.path.join(root, "include")
    return [inc, os.path.join(inc, "torch/csrc/api/include")], [os.path.join(root, "lib")]


def build(args):
    out = os.path.abspath(args.out_dir)
    csrc = os.path.join(out, "csrc")
    shutil.rmtree(csrc, ignore_errors=True)
    shutil.copytree(os.path.join(args.vllm, "csrc"), csrc)
    moe = os.path.join(csrc, "moe/marlin_moe_wna16")
    subprocess.run([sys.executable, "generate_kernels.py", args.arch], cwd=moe, check=True)
    n = filter_selector(os.path.join(moe, "kernel_selector.h"))
    log(f"kernel selector: {n} BF16 x FP4 kernels")
    stub = os.path.join(out, "stub")
    os.makedirs(os.path.join(stub, "core"), exist_ok=True)
    with open(os.path.join(stub, "core/registration.h"), "w") as f:
        f.write(REGISTRATION)
    with open(os.path.join(out, "bind.cpp"), "w") as f:
        f.write(BIND.replace("SCHEMA", json.dumps(schema(args.vllm))))
    kernels = [f for f in os.listdir(moe) if f.startswith("sm80_kernel_bfloat16_fe2m1f")]
    arch = args.arch.replace(".", "")
    torch_inc, torch_lib = torch_dirs()
    incs = [f"-I{stub}", f"-I{csrc}"] + [f"-I{p}" for p in torch_inc]
    if args.cuda_include:
        incs.append(f"-I{args.cuda_include}")
    defs = ["-DTORCH_EXTENSION_NAME=marlin_probe", "-D_GLIBCXX_USE_CXX11_ABI=1", "-DNDEBUG"]
    nvcc = [args.nvcc, "-O3", "-std=c++17", "-Xcompiler", "-fPIC", "--expt-relaxed-constexpr",
            "--expt-extended-lambda", "-static-global-template-stub=false",
            f"-gencode=arch=compute_{arch},code=sm_{arch}", *defs, *incs]
    jobs = [(nvcc + ["-c", os.path.join(moe, k), "-o", os.path.join(out, k + ".o")]) for k in kernels]
    jobs.append(nvcc + ["-c", os.path.join(moe, "ops.cu"), "-o", os.path.join(out, "ops.o")])
    jobs.append(["g++", "-O2", "-std=c++17", "-fPIC", *defs, *incs, "-c", os.path.join(out, "bind.cpp"),
                 "-o", os.path.join(out, "bind.o")])
    procs = [subprocess.Popen(j) for j in jobs]
    if any(p.wait() != 0 for p in procs):
        sys.exit("marlin_probe: a compile failed (above)")
    libs = [f"-L{p}" for p in torch_lib]
    if args.cuda_lib:
        libs.append(f"-L{args.cuda_lib}")
    objs = [os.path.join(out, k + ".o") for k in kernels] + [os.path.join(out, "ops.o"), os.path.join(out, "bind.o")]
    lib = os.path.join(out, "marlin_probe.so")
    subprocess.run(["g++", "-shared", "-o", lib, *objs, *libs, "-lc10", "-lc10_cuda", "-ltorch_cpu",
                    "-ltorch_cuda", "-ltorch", "-l:libcudart.so.13"], check=True)
    log(f"built {lib} ({os.path.getsize(lib) / 1e6:.1f} MB)")


# ----------------------------------------------------------------------------------------------
# run
def block_size(m, experts):
    """fused_marlin_moe's choice of the alignment block for m tokens."""
    for bs in (8, 16, 32, 48, 64):
        if m * TOP_K / experts / bs < 0.9:
            return bs
    return 64


class Shard:
    """One TP shard's experts in Marlin's layout, `copies` times over (rotated between calls)."""

    def __init__(self, tp, copies):
        import torch

        self.tp = tp
        self.k1 = round_up(HIDDEN, 256)
        self.inter = round_up(INTERMEDIATE // tp, 128)
        self.n1 = 2 * self.inter
        e = EXPERTS
        self.w1 = [torch.randint(-2**31, 2**31 - 1, (e, self.k1 // 16, 2 * self.n1), dtype=torch.int32, device="cuda")
                   for _ in range(copies)]
        self.w2 = [torch.randint(-2**31, 2**31 - 1, (e, self.inter // 16, 2 * self.k1), dtype=torch.int32, device="cuda")
                   for _ in range(copies)]
        one = 127  # e8m0 2^0
        self.s1 = [torch.full((e, self.k1 // 32, self.n1), one, dtype=torch.uint8, device="cuda").view(torch.float8_e8m0fnu)
                   for _ in range(copies)]
        self.s2 = [torch.full((e, self.inter // 32, self.k1), one, dtype=torch.uint8, device="cuda").view(torch.float8_e8m0fnu)
                   for _ in range(copies)]
        self.b1 = [torch.randn(e, self.n1, dtype=torch.bfloat16, device="cuda") * 0.01 for _ in range(copies)]
        self.b2 = [torch.randn(e, self.k1, dtype=torch.bfloat16, device="cuda") * 0.01 for _ in range(copies)]
        # bytes a touched expert streams: MXFP4 weights, their scales and the biases
        self.expert_bytes = (self.k1 * self.n1 + self.inter * self.k1) // 2 + \
            (self.k1 // 32) * self.n1 + (self.inter // 32) * self.k1 + 2 * (self.n1 + self.k1)


def run(args):
    import torch

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import kernel_probe as kp

    torch.ops.load_library(args.lib)
    op = torch.ops.marlin_probe.moe_wna16_marlin_gemm
    fe2m1f = torch.ops.marlin_probe.fe2m1f_id()
    torch.set_grad_enabled(False)
    props = torch.cuda.get_device_properties(0)
    head = {"device": props.name, "sms": props.multi_processor_count, "torch": torch.__version__,
            "cuda": torch.version.cuda, "experts": EXPERTS, "top_k": TOP_K, "hidden": HIDDEN,
            "intermediate": INTERMEDIATE, "vllm": args.vllm_version}
    log(head)
    records = []

    def save():
        with open(args.out, "w") as f:
            json.dump({"head": head, "records": records}, f, indent=1)

    ws = torch.zeros(props.multi_processor_count * 4, dtype=torch.int32, device="cuda")
    ms_all = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192]
    for tp in args.tp:
        copies = 8 if tp <= 2 else 16
        try:
            shard = Shard(tp, copies)
        except Exception as e:  # noqa: BLE001 - a shard that does not fit is recorded, not fatal
            records.append({"tp": tp, "error": f"{type(e).__name__}: {e}"})
            save()
            continue
        ms = ms_all if tp in (1, 8) else [1, 4, 16, 64, 256, 1024, 4096]
        for m in ms:
            if time.monotonic() - START > args.budget_s:
                log("budget spent")
                save()
                return
            try:
                rec = time_step(op, fe2m1f, shard, ws, m, copies, kp)
            except Exception as e:  # noqa: BLE001 - one failed point must not lose the others
                rec = {"tp": tp, "m": m, "error": f"{type(e).__name__}: {e}",
                       "trace": traceback.format_exc()[-1500:]}
            records.append(rec)
            log({k: v for k, v in rec.items() if k != "trace"})
            save()
        del shard
        torch.cuda.empty_cache()
    log("done")


def time_step(op, fe2m1f, sh, ws, m, copies, kp):
    import torch

    bs = block_size(m, EXPERTS)
    calls, touched = [], []
    for r in range(copies):
        x = torch.randn(m, sh.k1, dtype=torch.bfloat16, device="cuda")
        logits = torch.randn(m, EXPERTS, device="cuda")
        topw, topi = torch.topk(torch.softmax(logits, -1), TOP_K, dim=-1)
        sorted_ids, eids, ntp, n_touched = kp.moe_align(topi, bs, EXPERTS)
        touched.append(n_touched)
        c1 = torch.empty(m * TOP_K, sh.n1, dtype=torch.bfloat16, device="cuda")
        c2 = torch.empty(m * TOP_K, sh.inter, dtype=torch.bfloat16, device="cuda")
        c3 = torch.empty(m * TOP_K, sh.k1, dtype=torch.bfloat16, device="cuda")
        out = torch.empty(m, sh.k1, dtype=torch.bfloat16, device="cuda")
        topw = topw.float().contiguous()

        def gemm1(x=x, c1=c1, r=r, s=sorted_ids, e=eids, n=ntp, w=topw):
            op(x, c1, sh.w1[r], sh.b1[r], sh.s1[r], None, None, None, None, None, ws, s, e, n, w,
               bs, TOP_K, False, False, fe2m1f, m, sh.n1, sh.k1, True, False, True, False, -1, -1, -1)

        def gemm2(c2=c2, c3=c3, r=r, s=sorted_ids, e=eids, n=ntp, w=topw):
            op(c2, c3, sh.w2[r], sh.b2[r], sh.s2[r], None, None, None, None, None, ws, s, e, n, w,
               bs, 1, True, False, fe2m1f, m * TOP_K, sh.k1, sh.inter, True, False, True, False, -1, -1, -1)

        def act(c1=c1, c2=c2):
            torch.mul(c1[:, : sh.inter], c1[:, sh.inter:], out=c2)

        def moe_sum(c3=c3, out=out):
            torch.sum(c3.view(m, TOP_K, sh.k1), dim=1, out=out)

        calls.append((gemm1, act, gemm2, moe_sum))
    experts = kp.timed([(lambda c=c: (c[0](), c[2]())) for c in calls])
    layer = kp.timed([(lambda c=c: (c[0](), c[1](), c[2](), c[3]())) for c in calls])
    g1 = kp.timed([c[0] for c in calls])
    mean_touched = sum(touched) / len(touched)
    wbytes = mean_touched * sh.expert_bytes
    flops = 2.0 * m * TOP_K * (sh.k1 * sh.n1 + sh.inter * sh.k1)
    return {"tp": sh.tp, "m": m, "block": bs, "inter_padded": sh.inter, "hidden_padded": sh.k1,
            "copies": copies, "experts_touched": round(mean_touched, 2),
            "experts_us": experts["us"], "gate_up_us": g1["us"], "layer_us": layer["us"],
            "method": experts["method"],
            "weight_gb_per_s": round(wbytes / (experts["us"] * 1e-6) / 1e9, 1),
            "tflops": round(flops / (experts["us"] * 1e-6) / 1e12, 1)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="compile the Marlin MoE kernels of a vLLM source tree")
    b.add_argument("--vllm", required=True, help="vLLM source tree (its csrc/ is read)")
    b.add_argument("--out-dir", required=True)
    b.add_argument("--nvcc", default="nvcc")
    b.add_argument("--arch", default="9.0")
    b.add_argument("--cuda-include", help="CUDA headers, if not where nvcc finds them")
    b.add_argument("--cuda-lib", help="folder of libcudart.so.13, if not on the linker's path")
    r = sub.add_parser("run", help="time the kernels on this GPU")
    r.add_argument("--lib", required=True, help="marlin_probe.so from `build`")
    r.add_argument("--out", required=True, help="JSON file to write")
    r.add_argument("--tp", type=int, nargs="+", default=[1, 8, 2, 4])
    r.add_argument("--budget-s", type=float, default=300.0, help="stop starting new points after this")
    r.add_argument("--vllm-version", default="", help="recorded in the JSON's head")
    args = ap.parse_args()
    if args.cmd == "build":
        build(args)
    else:
        import torch

        if not torch.cuda.is_available():
            sys.exit("marlin_probe: no CUDA device; `run` measures a GPU and needs one")
        run(args)


if __name__ == "__main__":
    main()
