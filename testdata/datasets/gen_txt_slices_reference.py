"""Writes txt_slices_<tokenizer>.json: the prompts vLLM's `txt-slices` dataset cuts from
txt_slices.txt, with their lengths, for a few parameter sets.

usage: python gen_txt_slices_reference.py TOKENIZER_DIR txt_slices.txt > txt_slices_qwen3.json

Follows vLLM's `TxtSlicesDataset` (vllm/benchmarks/datasets): the whole text tokenized without
special tokens; random.seed(seed); per request a start from random.randint(0, total - 1),
input_len tokens from it wrapping past the end, decoded with special tokens kept, its length
counted again with special tokens.
"""

import json
import random
import sys

from transformers import AutoTokenizer

tok = AutoTokenizer.from_pretrained(sys.argv[1])
text = open(sys.argv[2], encoding="utf-8").read()
ids = tok(text, add_special_tokens=False).input_ids
total = len(ids)

CASES = [
    {"num": 6, "seed": 0, "input_len": 32},
    {"num": 4, "seed": 7, "input_len": 500},
    {"num": 3, "seed": 1, "input_len": 1},
]


def run(case):
    random.seed(case["seed"])
    out = []
    for _ in range(case["num"]):
        start = random.randint(0, total - 1)
        prompt = tok.decode([ids[(start + j) % total] for j in range(case["input_len"])], skip_special_tokens=False)
        out.append({"start": start, "prompt": prompt, "prompt_len": len(tok(prompt, add_special_tokens=True).input_ids)})
    return {**case, "total_tokens": total, "samples": out, "next_random": random.random()}


json.dump([run(c) for c in CASES], sys.stdout, indent=1, ensure_ascii=False)
print()
