"""Writes reference/<name>.json: what the Hugging Face stack does with a tokenizer folder.

usage: python gen_reference.py NAME TOKENIZER_DIR [SHAREGPT_FIXTURE]

Recorded with transformers (AutoTokenizer) so the Rust loader, encoder, decoder and chat-template
renderer can be compared with it: vocab_size, num_special_tokens_to_add, all_special_ids,
encodings with and without special tokens, decodings of random id runs, and
apply_chat_template(tokenize=False) renderings (None where the template raises).
"""

import json
import sys

import numpy as np
import transformers
from transformers import AutoTokenizer

name, path = sys.argv[1], sys.argv[2]
fixture = sys.argv[3] if len(sys.argv) > 3 else None
tok = AutoTokenizer.from_pretrained(path)

texts = [
    "",
    " ",
    "Hello world , isn't it ?",
    "  leading and trailing spaces  ",
    "line one\nline two\r\nline three\n\n\n",
    "tabs\tand\u00a0non-breaking spaces",
    "emoji 🦀🚀 and CJK 你好，世界 and accents: café naïve",
    "numbers 1234567890 3.14159 -42 1e10",
    "<|im_start|>user\nliteral special tokens<|im_end|><bos><|begin_of_text|>",
    "code: fn main() { println!(\"{}\", x); } // comment",
    " the of and to in is that for it as was with be by on not he",
]
if fixture:
    data = json.load(open(fixture, encoding="utf-8"))
    for e in data[:60]:
        conv = e.get("conversations", [])
        if conv:
            texts.append(conv[0]["value"][:1500])

rng = np.random.default_rng(7)
decode_cases = [rng.integers(0, tok.vocab_size, size=40).tolist() for _ in range(12)]
specials = sorted(tok.all_special_ids)
decode_cases.append(specials[:5] + [100, 200, 300] + specials[-3:])

conversations = [
    {"messages": [{"role": "user", "content": "What is the capital of France?"}]},
    {"messages": [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Name three colours.\nOne per line."},
    ]},
    {"messages": [
        {"role": "user", "content": "Hi there"},
        {"role": "assistant", "content": "Hello! How can I help?"},
        {"role": "user", "content": "Tell me a joke about Rust 🦀."},
    ]},
    {"messages": [
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "<think>\nEasy sum.\n</think>\n\n4"},
        {"role": "user", "content": "and 3+3?"},
    ]},
    {"messages": [{"role": "user", "content": "  spaced  \n\n"}], "kwargs": {"enable_thinking": False}},
    {"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]},
    {"messages": [{"role": "user", "content": "What's the weather in Paris?"}],
     "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather <now> & 'later'",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]},
]

renders = []
if tok.chat_template is not None:
    for case in conversations:
        for agp in (True, False):
            try:
                out = tok.apply_chat_template(
                    case["messages"], tools=case.get("tools"), tokenize=False,
                    add_generation_prompt=agp, **case.get("kwargs", {}))
            except Exception as e:  # the template raised
                out = None
            renders.append({**case, "add_generation_prompt": agp, "rendered": out})

ref = {
    "transformers": transformers.__version__,
    "name": name,
    "vocab_size": tok.vocab_size,
    "num_special_tokens_to_add": tok.num_special_tokens_to_add(),
    "all_special_ids": specials,
    "encodings": [
        {"text": t, "with_special": tok(t).input_ids, "without_special": tok.encode(t, add_special_tokens=False)}
        for t in texts
    ],
    "decodings": [{"ids": ids, "text": tok.decode(ids)} for ids in decode_cases],
    "renders": renders,
}
json.dump(ref, sys.stdout, ensure_ascii=False)
