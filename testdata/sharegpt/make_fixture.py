"""Cuts the ShareGPT test fixture from the full ShareGPT V3 file.

usage: python make_fixture.py ShareGPT_V3_unfiltered_cleaned_split.json > sharegpt_small.json

The cut keeps the file's schema and order and mixes: short single- and multi-turn chats,
chats whose first prompt is long (so the 1024-token filter fires), entries with fewer than
two messages (dropped by the loader) and chats that open with a system message.
"""

import json
import sys

data = json.load(open(sys.argv[1], encoding="utf-8"))


def size(e):
    return sum(len(t.get("value", "")) for t in e.get("conversations", []))


picked = []
short = long_prompt = tiny = system = 0
for i, e in enumerate(data):
    conv = e.get("conversations", [])
    if len(conv) < 2 and tiny < 12 and i % 7 == 0:
        picked.append(e)
        tiny += 1
    elif conv and conv[0].get("from") == "system" and system < 4 and size(e) < 20000:
        picked.append(e)
        system += 1
    elif len(conv) >= 2 and len(conv[0]["value"]) > 5000 and long_prompt < 20 and size(e) < 16000 and i % 3 == 0:
        picked.append(e)
        long_prompt += 1
    elif len(conv) >= 2 and size(e) < 4000 and short < 280 and i % 29 == 0:
        picked.append(e)
        short += 1

sys.stderr.write("picked %d: short %d long %d tiny %d system %d\n" % (len(picked), short, long_prompt, tiny, system))
json.dump(picked, sys.stdout, ensure_ascii=False, indent=1)
