"""Realistic mistakes in exercises 12-14 that no pitfall variant makes,
each written as edits of the reference (tests/test_judge_confirmed.py):
the judge must not tell any of them that a catalogued mistake is *theirs*.

Each entry: exercise id -> {name: [(old, new), ...]}; every ``old`` occurs
exactly once in the reference (:func:`source` checks it).
"""
from __future__ import annotations

from grader.course import REPO_ROOT

# A GPT block that attends by hand (split heads, scores, mask, softmax), so
# that mistakes inside attention can be made in exercise 12 itself.
_OWN_ATTENTION = [
    ("from multihead import MultiHeadAttention\n",
     "import math\n\nfrom multihead import MultiHeadAttention, merge_heads, split_heads\n"),
    ("        self.drop = nn.Dropout(dropout)\n\n    def forward(self, x: torch.Tensor)",
     "        self.drop = nn.Dropout(dropout)\n\n"
     "    def _attend(self, x):\n"
     "        a = self.attn\n"
     "        n = x.size(1)\n"
     "        q, k, v = (SPLIT for w in (a.W_query, a.W_key, a.W_value))\n"
     "        scores = q @ k.transpose(-2, -1) / math.sqrt(SCALE)\n"
     "        mask = torch.triu(torch.ones(n, n, dtype=torch.bool, device=x.device), diagonal=DIAGONAL)\n"
     "        scores = scores.masked_fill(mask, float('-inf'))\n"
     "        return a.out_proj(merge_heads(a.dropout(torch.softmax(scores, dim=-1)) @ v))\n\n"
     "    def forward(self, x: torch.Tensor)"),
    ("x = x + self.drop(self.attn(self.norm1(x)))", "x = x + self.drop(self._attend(self.norm1(x)))"),
]
_SPLIT = "split_heads(w(x), a.num_heads)"
_NO_TRANSPOSE = "w(x).reshape(x.size(0), a.num_heads, n, a.head_dim)"


def _own_attention(split: str = _SPLIT, scale: str = "a.head_dim", diagonal: str = "1") -> list[tuple[str, str]]:
    body = _OWN_ATTENTION[1][1].replace("SPLIT", split).replace("SCALE", scale).replace("DIAGONAL", diagonal)
    return [_OWN_ATTENTION[0], (_OWN_ATTENTION[1][0], body), _OWN_ATTENTION[2]]


MISTAKES: dict[str, dict[str, list[tuple[str, str]]]] = {
    "12": {
        "sees-the-next-token": _own_attention(diagonal="2"),
        "heads-without-transpose": _own_attention(split=_NO_TRANSPOSE),
        "scaled-by-d-model": _own_attention(scale="x.size(-1)"),
        "dropout-on-the-logits": [("return self.head(self.final_norm(x))",
                                   "return self.drop(self.head(self.final_norm(x)))")],
    },
    "13": {
        "flattened-in-different-orders": [("F.cross_entropy(logits.flatten(0, 1), y.flatten())",
                                           "F.cross_entropy(logits.transpose(0, 1).flatten(0, 1), y.flatten())")],
        "loss-after-the-step": [("    optimizer.step()\n    return loss.item()",
                                 "    optimizer.step()\n    return compute_loss(model, x, y).item()")],
        "greedy-instead-of-sampling": [
            ("next_token = torch.multinomial(probs, num_samples=1, generator=generator)",
             "next_token = probs.argmax(dim=-1, keepdim=True)")],
        "clipped-after-the-step": [
            ("    nn.utils.clip_grad_norm_(model.parameters(), grad_clip)\n    optimizer.step()\n",
             "    optimizer.step()\n    nn.utils.clip_grad_norm_(model.parameters(), grad_clip)\n")],
    },
    "14": {
        "scaled-by-d-model": [("scores = q @ k.transpose(-2, -1) / math.sqrt(attn.head_dim)",
                               "scores = q @ k.transpose(-2, -1) / math.sqrt(x.size(-1))")],
        "chunk-sees-the-next-token": [
            ("blocked = torch.ones(n, total, dtype=torch.bool, device=idx.device).triu(start + 1)",
             "blocked = torch.ones(n, total, dtype=torch.bool, device=idx.device).triu(start + 2)")],
        "greedy-on-the-first-position": [
            ("        next_id = logits[:, -1].argmax(dim=-1, keepdim=True)             # (b, 1)",
             "        next_id = logits[:, 0].argmax(dim=-1, keepdim=True)              # (b, 1)")],
    },
}


def source(exercise, edits: list[tuple[str, str]]) -> str:
    """The reference of ``exercise`` with ``edits`` applied (each once)."""
    text = (REPO_ROOT / "solutions" / exercise.folder / exercise.module).read_text()
    for old, new in edits:
        assert text.count(old) == 1, f"{exercise.folder}: {old!r} is not in the reference exactly once"
        text = text.replace(old, new)
    return text
