"""Writes random_<tokenizer>.json: prompts of vLLM's `random` dataset and the request bodies
vLLM would send for them, for a few parameter sets.

usage: python gen_random_reference.py TOKENIZER_DIR > random_qwen3.json

The sampling follows vLLM 0.33's `RandomDataset.sample` (vllm/benchmarks/datasets.py) with
numpy's default_rng and a transformers tokenizer; bodies are json.dumps of the payloads its
completions and chat request functions build (vllm/benchmarks/lib/endpoint_request_func.py).
"""

import json
import math
import sys

import numpy as np
from transformers import AutoTokenizer

import vllm_fit

tok = AutoTokenizer.from_pretrained(sys.argv[1])

CASES = [
    {"num": 6, "input_len": 64, "output_len": 16, "ratio": [0.0, 0.0], "prefix": 0, "seed": 0},
    {"num": 8, "input_len": 200, "output_len": 50, "ratio": [0.5, 0.5], "prefix": 16, "seed": 42},
    {"num": 5, "input_len": 100, "output_len": 10, "ratio": [0.3, 0.0], "prefix": 0, "seed": 7},
    {"num": 4, "input_len": 3, "output_len": 1, "ratio": [0.9, 0.9], "prefix": 5, "seed": 3},
]


def fit(ids, target, rng):
    return vllm_fit.fit(tok, ids, target, lambda n: rng.integers(0, tok.vocab_size, size=n).tolist())


def run(case):
    rng = np.random.default_rng(case["seed"])
    special = tok.num_special_tokens_to_add()
    real = max(0, case["input_len"] - special)
    ri, ro = case["ratio"]
    in_lo, in_hi = math.floor(real * (1 - ri)), math.ceil(real * (1 + ri))
    out_lo = max(math.floor(case["output_len"] * (1 - ro)), 1)
    out_hi = max(math.ceil(case["output_len"] * (1 + ro)), 1)
    n = case["num"]
    input_lens = rng.integers(in_lo, in_hi + 1, size=n)
    output_lens = rng.integers(out_lo, out_hi + 1, size=n)
    offsets = rng.integers(0, tok.vocab_size, size=n)
    banned = set(tok.all_special_ids)
    allowed = np.array([i for i in range(tok.vocab_size) if i not in banned])
    prefix = []
    if case["prefix"] > 0:
        picks = allowed[rng.integers(0, len(allowed), size=case["prefix"])].tolist()
        prefix = fit(picks, case["prefix"], rng)[1]
    out = []
    for i in range(n):
        inner = allowed[(offsets[i] + i + np.arange(input_lens[i])) % len(allowed)].tolist()
        text, ids = fit(prefix + inner, case["prefix"] + int(input_lens[i]), rng)
        out.append({"prompt": text, "prompt_len": len(ids), "output_len": int(output_lens[i])})
    return {"ranges": [in_lo, in_hi, out_lo, out_hi], "samples": out}


def bodies(samples, model, extra):
    comp, chat = [], []
    for s in samples:
        p = {"model": model, "prompt": s["prompt"], "repetition_penalty": 1.0,
             "max_tokens": s["output_len"], "logprobs": None, "stream": True,
             "stream_options": {"include_usage": True}, "ignore_eos": True}
        p.update(extra)
        comp.append(json.dumps(p))
        c = {"model": model, "messages": [{"role": "user", "content": [{"type": "text", "text": s["prompt"]}]}],
             "max_completion_tokens": s["output_len"], "stream": True,
             "stream_options": {"include_usage": True}, "ignore_eos": True}
        c.update(extra)
        chat.append(json.dumps(c))
    return comp, chat


EXTRA = {"temperature": 0.7, "max_tokens": 5, "top_k": -1, "min_p": 1e-05}
results = []
for case in CASES:
    r = run(case)
    r["case"] = case
    r["completions_bodies"], r["chat_bodies"] = bodies(r["samples"], "Qwen/Qwen3-0.6B", EXTRA)
    results.append(r)
json.dump({"model": "Qwen/Qwen3-0.6B", "extra_body": EXTRA, "cases": results}, sys.stdout, ensure_ascii=False)
