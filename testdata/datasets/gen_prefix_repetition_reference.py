"""Writes prefix_repetition_<tokenizer>.json: vLLM's `prefix_repetition` prompts, and the next
draws of the global legacy np.random after them (which vLLM's arrival gaps then use).

usage: python gen_prefix_repetition_reference.py TOKENIZER_DIR > prefix_repetition_qwen3.json

Follows vLLM 0.33's `PrefixRepetitionRandomDataset` (vllm/benchmarks/datasets.py): random.seed and np.random.seed with the seed,
np.random.randint ids per prefix and per suffix fitted to their lengths (extensions drawn from
np.random.randint), prompt = decode(prefix + suffix), then random.shuffle.
"""

import json
import random
import struct
import sys

import numpy as np
from transformers import AutoTokenizer

import vllm_fit

tok = AutoTokenizer.from_pretrained(sys.argv[1])


def fit(ids, target):
    return vllm_fit.fit(tok, ids, target, lambda n: np.random.randint(0, tok.vocab_size, size=n).tolist())[1]


def run(case):
    random.seed(case["seed"])
    np.random.seed(case["seed"])
    per = case["num"] // case["num_prefixes"]
    out = []
    for _ in range(case["num_prefixes"]):
        prefix = fit(np.random.randint(0, tok.vocab_size, size=case["prefix_len"]).tolist(), case["prefix_len"])
        for _ in range(per):
            suffix = fit(np.random.randint(0, tok.vocab_size, size=case["suffix_len"]).tolist(), case["suffix_len"])
            ids = prefix + suffix
            out.append({"prompt": tok.decode(ids), "prompt_len": len(ids)})
    random.shuffle(out)
    nxt = [struct.unpack("<Q", struct.pack("<d", np.random.gamma(1.0, 1.0)))[0] for _ in range(3)]
    return {"case": case, "samples": out, "next_gamma_bits": nxt}


CASES = [
    {"num": 10, "prefix_len": 32, "suffix_len": 8, "num_prefixes": 3, "output_len": 16, "seed": 0},
    {"num": 6, "prefix_len": 5, "suffix_len": 40, "num_prefixes": 2, "output_len": 4, "seed": 11},
]
json.dump({"cases": [run(c) for c in CASES]}, sys.stdout, ensure_ascii=False)
