"""Writes sharegpt_<tokenizer>.json: which fixture conversations vLLM's `sharegpt` dataset
picks, in which order, with which lengths, for a few parameter sets.

usage: python gen_sharegpt_reference.py TOKENIZER_DIR ../sharegpt/sharegpt_small.json > sharegpt_qwen3.json

Follows vLLM 0.33's `ShareGPTDataset` (vllm/benchmarks/datasets.py): keep entries with >= 2 messages, random.seed(seed)
then random.shuffle, count tokens with special tokens, drop prompt < 4, output < 4 (unless the
output length is fixed), prompt > 1024 or prompt + output > 2048, then top up with
random.choice after random.seed(seed).
"""

import json
import random
import sys

from transformers import AutoTokenizer

tok = AutoTokenizer.from_pretrained(sys.argv[1])
data = json.load(open(sys.argv[2], encoding="utf-8"))
kept = [e for e in data if "conversations" in e and len(e["conversations"]) >= 2]

CASES = [
    {"num": 40, "seed": 0, "output_len": None, "shuffle": True, "oversample": True},
    {"num": 400, "seed": 1, "output_len": None, "shuffle": True, "oversample": True},
    {"num": 400, "seed": 1, "output_len": None, "shuffle": True, "oversample": False},
    {"num": 30, "seed": 5, "output_len": 100, "shuffle": True, "oversample": True},
    {"num": 25, "seed": 0, "output_len": None, "shuffle": False, "oversample": True},
]


def run(case):
    rows = list(kept)
    random.seed(case["seed"])
    if case["shuffle"]:
        random.shuffle(rows)
    out = []
    for e in rows:
        if len(out) >= case["num"]:
            break
        prompt, completion = e["conversations"][0]["value"], e["conversations"][1]["value"]
        p = len(tok(prompt).input_ids)
        o = len(tok(completion).input_ids) if case["output_len"] is None else case["output_len"]
        short_out = case["output_len"] is None and o < 4
        if p < 4 or short_out or p > 1024 or p + o > 2048:
            continue
        out.append({"id": e.get("id"), "prompt_len": p, "output_len": o})
    valid = len(out)
    if case["oversample"] and len(out) < case["num"]:
        random.seed(case["seed"])
        extra = [random.choice(out) for _ in range(case["num"] - len(out))]
        out += extra
    return {"case": case, "valid": valid, "samples": out}


json.dump({"entries": len(data), "with_two_messages": len(kept), "cases": [run(c) for c in CASES]}, sys.stdout)
