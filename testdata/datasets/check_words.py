"""Picks the synthetic-prompt vocabulary: common lowercase English words that are one token,
with their leading space, in every tokenizer given, and checks that random runs of them encode
to exactly one token per word.

usage: python check_words.py TOKENIZER_DIR [TOKENIZER_DIR ...]
Prints the surviving words as a Rust array body.
"""

import sys

import numpy as np
from transformers import AutoTokenizer

CANDIDATES = """
the of and to in is that for it as was with be by on not he this are or his from at which but
have an they you were her she there been one all we their has would when if so no will more
about can its up out them into only some time could these two may then first any my now such
like other how our over also new most just people very what after know well where much make
many good way before must through back years where work should because each long even little
state own world here old year did same day take great last three high come since under life
never might while house part found again made being both between under down each man men
under thing think help home small large next hand place show city water point right open
word side kind head fact plan ground line light order power form money field north south
east west food paper music river table story young group early across begin start game book
black white green blue red yellow brown color level model value range price market system
level note note road study month week hour night morning summer winter spring garden
window door room floor wall street train plane ship car boat bird fish tree flower stone
glass metal wood fire earth air sea sky sun moon star cloud rain snow wind storm island
mountain valley forest desert lake bridge tower castle church school student teacher doctor
friend family mother father brother sister child baby girl boy woman king queen army war
peace law court party member voice film movie picture art letter number page list question
answer problem reason result chance choice change idea truth energy health heart mind body
face eye ear nose mouth arm leg foot skin hair blood bone horse dog cat cow sheep chicken
apple bread milk coffee tea sugar salt rice corn egg cheese butter meat soup dinner lunch
breakfast kitchen bed chair box bag cup plate bottle key clock phone computer screen camera
radio video office bank shop store hotel station airport hospital library museum park
village country nation government company business industry job worker farmer driver
leader player team club match goal ball race speed distance weight height size shape
""".split()

paths = sys.argv[1:]
toks = [AutoTokenizer.from_pretrained(p) for p in paths]
words = []
for w in CANDIDATES:
    if w in words:
        continue
    if all(len(t.encode(" " + w, add_special_tokens=False)) == 1 for t in toks):
        words.append(w)

rng = np.random.default_rng(0)
for t, p in zip(toks, paths):
    for n in [1, 2, 7, 100, 1000, 3000]:
        for _ in range(5):
            idx = rng.integers(0, len(words), size=n)
            text = "".join(" " + words[i] for i in idx)
            got = len(t.encode(text, add_special_tokens=False))
            assert got == n, (p, n, got)
sys.stderr.write("%d words kept of %d\n" % (len(words), len(set(CANDIDATES))))
for i in range(0, len(words), 12):
    print("    " + " ".join('"%s",' % w for w in words[i:i + 12]))
