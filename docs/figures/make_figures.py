"""Regenerate the attention figures of exercises 11 and 12's READMEs.

    .venv/bin/python docs/figures/make_figures.py [--out docs/figures] [--check]

From the reference solutions, seeded, one thread (the same bytes on every
run of the same torch build; about 15 s on 2 cores):

- ``copy_cross_attention.svg``: exercise 11's copy model, trained as the
  hidden check trains it, then its decoder's cross-attention on one
  source: a diagonal (each target position reads the source position it copies);
- ``copy_no_positional_encoding.svg``: the same training with the
  positional encoding replaced by the identity, beside the model with it,
  with greedy decoding's exact-match rate of both: without positions the
  encoder's output is a bag of tokens, the attention spreads and copying fails;
- ``gpt_self_attention.svg``: exercise 12's GPT, trained for a few
  seconds on the Zen of Python (real text that every Python carries:
  ``import this``), its two blocks' self-attention on the first line.
- ``sliding_window_reach.svg``: exercise 18's window mask (12 positions,
  window 3), and which positions reach the last token after 1, 2 and 3
  windowed layers, measured by gradients through the reference's
  ``windowed_forward`` (the probes the feedback figures use).

``--check`` compares with the committed files instead of writing them
(exit 1 on a difference).
"""
from __future__ import annotations

import argparse
import contextlib
import io
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402
from torch import nn  # noqa: E402

from coursekit.loader import load_module  # noqa: E402
from coursekit.probes.attention_maps import (copy_cross_attention, recorded_attention,  # noqa: E402
                                             without_positional_encoding)
from coursekit.probes.copy_task import END, START  # noqa: E402
from grader.report.attention_figures import Panel, attention_figure  # noqa: E402

COPY = {"seed": 7, "steps": 300, "length": 8}  # longer than the hidden check's 150 steps: a cleaner diagonal
GPT_CONFIG = {"context_length": 48, "d_model": 64, "num_heads": 4, "num_layers": 2, "dropout": 0.0}
GPT_TRAINING = {"seed": 0, "steps": 400, "batch": 16, "lr": 3e-3}
SAMPLE = "Beautiful is better than ugly."
COPY_TOKENS = {START: "<s>", END: "</s>"}


def reference_module(folder: str, module: str, work: Path):
    """The reference solution, in a copy of its exercise folder (the modules it ships beside it)."""
    copy = work / folder
    shutil.copytree(REPO / "exercises" / folder, copy)
    shutil.copy(REPO / "solutions" / folder / f"{module}.py", copy / f"{module}.py")
    return load_module(copy, module)


def zen_of_python() -> str:
    """PEP 20, decoded from the standard library's ``this`` module (which prints it when imported)."""
    with contextlib.redirect_stdout(io.StringIO()):
        import this
    return "".join(this.d.get(ch, ch) for ch in this.s)


def _copy_label(token: int) -> str:
    return COPY_TOKENS.get(token, str(token))


def copy_figures(transformer) -> dict[str, str]:
    found = copy_cross_attention(transformer, **COPY)
    ablated = copy_cross_attention(without_positional_encoding(transformer), **COPY)
    queries = [_copy_label(t) for t in found["queries"]]
    keys = [_copy_label(t) for t in found["keys"]]
    diagonal = attention_figure(
        [Panel(("cross-attention, mean of 4 heads", "交叉注意力，4 个头的平均"),
               found["cross_attention"].tolist(), queries, keys)],
        ("Exercise 11's copy model after training: target position t reads source position t.",
         "练习 11 的复制模型训练后：目标位置 t 读取源位置 t。"),
        axes=("source tokens (keys)", "decoder input (queries)"))
    pair = attention_figure(
        [Panel((f"with positional encoding: {found['exact_match']:.0%} copied",
                f"有位置编码：{found['exact_match']:.0%} 完全复制"), found["cross_attention"].tolist(), queries, keys),
         Panel((f"without: {ablated['exact_match']:.0%} copied", f"没有位置编码：{ablated['exact_match']:.0%} 完全复制"),
               ablated["cross_attention"].tolist(), queries, keys)],
        ("Same training, positional encoding removed: the attention no longer finds the position to copy.",
         "同样的训练，去掉位置编码：注意力再也找不到要复制的位置。"),
        axes=("source tokens (keys)", "decoder input (queries)"))
    return {"copy_cross_attention.svg": diagonal, "copy_no_positional_encoding.svg": pair}


def train_gpt(gpt, text: str) -> tuple[nn.Module, dict[str, int], float]:
    """A character-level GPT trained on ``text``; (model in eval mode, vocabulary, last loss)."""
    vocab = {ch: i for i, ch in enumerate(sorted(set(text)))}
    data = torch.tensor([vocab[ch] for ch in text])
    n = GPT_CONFIG["context_length"]
    torch.manual_seed(GPT_TRAINING["seed"])
    model = gpt.GPT(vocab_size=len(vocab), **GPT_CONFIG)
    optimiser = torch.optim.AdamW(model.parameters(), lr=GPT_TRAINING["lr"])
    gen = torch.Generator().manual_seed(GPT_TRAINING["seed"])
    model.train()
    for _ in range(GPT_TRAINING["steps"]):
        starts = torch.randint(0, len(data) - n - 1, (GPT_TRAINING["batch"],), generator=gen)
        x = torch.stack([data[s:s + n] for s in starts])          # (b, n) contexts
        y = torch.stack([data[s + 1:s + n + 1] for s in starts])  # (b, n) the next characters
        logits = model(x)
        loss = nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    model.eval()
    return model, vocab, float(loss)


def gpt_figure(gpt) -> dict[str, str]:
    model, vocab, loss = train_gpt(gpt, zen_of_python())
    idx = torch.tensor([[vocab[ch] for ch in SAMPLE]])
    maps = recorded_attention(lambda: model(idx))
    chars = list(SAMPLE)
    panels = [Panel((f"block {i + 1}, mean of {GPT_CONFIG['num_heads']} heads", f"第 {i + 1} 块，各头平均"),
                    found[0].to(torch.float64).mean(dim=0).tolist(), chars, chars) for i, found in enumerate(maps)]
    return {"gpt_self_attention.svg": attention_figure(
        panels,
        (f"Exercise 12's GPT trained on the Zen of Python (loss {loss:.2f}): nothing above the diagonal.",
         f"练习 12 的 GPT 在 Python 之禅上训练（损失 {loss:.2f}）：对角线以上全为零。"),
        axes=("earlier characters (keys)", "characters (queries)"))}


def sliding_window_figure(reference) -> dict[str, str]:
    from coursekit.probes import sliding_window as probes
    from grader.checks import sliding_window as checks

    n, window = checks.FIGURE_LENGTH, checks.FIGURE_WINDOW
    positions = [str(p) for p in range(n)]
    visible = probes.window_picture(reference, n, window)["visible"].tolist()
    reached = probes.reach(reference, checks.FIGURE_CONFIG, 0, n, window, [1, 2, 3])["reach"].tolist()
    return {"sliding_window_reach.svg": attention_figure(
        [Panel((f"the window, W = {window}", f"窗口，W = {window}"), visible, positions, positions),
         Panel(("what reaches the last token", "能到达最后一个 token 的位置"), reached,
               ["L=1", "L=2", "L=3"], positions)],
        (f"Left: each query sees its last {window} positions. Right: after L layers the last token is reached "
         f"from L (W - 1) + 1 positions: {', '.join(str(int(sum(r))) for r in reached)}.",
         f"左：每个 query 看到它最后 {window} 个位置。右：经过 L 层后，能到达最后一个 token 的位置有 "
         f"L (W - 1) + 1 个：{'、'.join(str(int(sum(r))) for r in reached)}。"),
        axes=("positions (keys)", "queries, or the number of layers L"))}


def make_all() -> dict[str, str]:
    """File name -> SVG text, for every figure."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the same floating-point sums on every run
    try:
        with tempfile.TemporaryDirectory() as work:
            figures = copy_figures(reference_module("11_transformer", "transformer", Path(work)))
            figures.update(gpt_figure(reference_module("12_gpt", "gpt", Path(work))))
            figures.update(sliding_window_figure(reference_module("18_sliding_window", "sliding_window", Path(work))))
    finally:
        torch.set_num_threads(threads)
    return {name: str(svg) + "\n" for name, svg in figures.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "figures")
    parser.add_argument("--check", action="store_true", help="compare with the files in --out; write nothing")
    args = parser.parse_args(argv)
    differ = []
    for name, svg in make_all().items():
        path = args.out / name
        if args.check:
            if not path.exists() or path.read_text(encoding="utf-8") != svg:
                differ.append(name)
        else:
            args.out.mkdir(parents=True, exist_ok=True)
            path.write_text(svg, encoding="utf-8")
            print(f"wrote {path.relative_to(REPO) if path.is_relative_to(REPO) else path}")
    if differ:
        print("differ from the committed figures: " + ", ".join(differ))
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
