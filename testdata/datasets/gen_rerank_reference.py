"""Writes random_rerank_<tokenizer>.json: the request bodies vLLM's `vllm-rerank` backend would
send for its `random-rerank` dataset, and each request's prompt_len, for a few parameter sets.

usage: python gen_rerank_reference.py TOKENIZER_DIR > random_rerank_qwen3.json

The sampling follows vLLM's `RandomDatasetForReranking.sample` (vllm/benchmarks/datasets.py)
with numpy's default_rng and a transformers tokenizer; the bodies are json.dumps of the payload
its rerank request function builds (vllm/benchmarks/lib/endpoint_request_func.py).
"""

import json
import math
import sys

import numpy as np
from transformers import AutoTokenizer

import vllm_fit

tok = AutoTokenizer.from_pretrained(sys.argv[1])

CASES = [
    {"num": 6, "input_len": 64, "ratio": 0.0, "batch": 4, "reranker": True, "seed": 0},
    {"num": 9, "input_len": 120, "ratio": 0.5, "batch": 2, "reranker": True, "seed": 42},
    {"num": 7, "input_len": 50, "ratio": 0.3, "batch": 3, "reranker": False, "seed": 7},
]


def fit(ids, target, rng):
    return vllm_fit.fit(tok, ids, target, lambda n: rng.integers(0, tok.vocab_size, size=n).tolist())


def sampling_params(rng, n, ratio, input_len):
    real = max(0, input_len - tok.num_special_tokens_to_add())
    lo, hi = math.floor(real * (1 - ratio)), math.ceil(real * (1 + ratio))
    lens = rng.integers(lo, hi + 1, size=n)
    rng.integers(1, 2, size=n)  # the output lengths, of an output length of 0
    offsets = rng.integers(0, tok.vocab_size, size=n)
    return lens, offsets


def run(case):
    rng = np.random.default_rng(case["seed"])
    sep = int(case["reranker"])
    n, batch = case["num"], case["batch"]
    query_param = case["input_len"] // 2 - sep if case["reranker"] else case["input_len"]
    qlens, qoffs = sampling_params(rng, 1, case["ratio"], query_param)
    qlen = int(qlens[0])
    if not case["reranker"]:
        n -= 1
        batch -= 1
        doc_param = case["input_len"]
    else:
        doc_param = case["input_len"] - qlen - sep
    dlens, doffs = sampling_params(rng, n, case["ratio"], doc_param)
    banned = set(tok.all_special_ids)
    allowed = np.array([i for i in range(tok.vocab_size) if i not in banned])

    def text(offset, index, length):
        inner = allowed[(offset + index + np.arange(length)) % len(allowed)].tolist()
        return fit(inner, length, rng)

    query, qids = text(int(qoffs[0]), 0, qlen)
    docs = [text(int(doffs[i]), i + 1, int(dlens[i])) for i in range(n)]
    bodies, lens = [], []
    for i in range(0, n, batch):
        b = docs[i:i + batch]
        contrib = (len(qids) + sep) * len(b) if case["reranker"] else len(qids)
        lens.append(contrib + sum(len(d[1]) for d in b))
        bodies.append(json.dumps({"model": "Qwen/Qwen3-0.6B", "query": query,
                                  "documents": [d[0] for d in b], "truncate_prompt_tokens": -1}))
    return {"bodies": bodies, "prompt_lens": lens}


results = []
for case in CASES:
    r = run(case)
    r["case"] = case
    results.append(r)
json.dump({"model": "Qwen/Qwen3-0.6B", "cases": results}, sys.stdout, ensure_ascii=False)
