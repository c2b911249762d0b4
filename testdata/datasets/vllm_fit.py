"""vLLM's `gen_prompt_decode_to_target_len` (vllm/benchmarks/datasets.py), shared by the
reference generators: decode the token ids, encode the text again, then pad with fresh random
ids or cut to the target length, up to ten times, until the text encodes to exactly `target`
tokens (or the tries run out). Each dataset draws its padding from its own generator, so the
caller passes `draw(n)`, which returns n random token ids.
"""


def fit(tok, ids, target, draw):
    """Returns the prompt text and its token ids."""
    tries = 10
    while True:
        text = tok.decode(ids)
        ids = tok.encode(text, add_special_tokens=False)
        if tries <= 0 or len(ids) == target:
            return text, ids
        if len(ids) < target:
            ids = ids + draw(target - len(ids))
        else:
            ids = ids[:target]
        tries -= 1
