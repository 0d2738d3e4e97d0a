"""Make exercise 16's README figure: the rotation of one query/key pair.

    .venv/bin/python docs/figures/make_rope_figure.py [--check]

One pair of coordinates (the fastest, theta_0 = 1 radian per position) of
the README's worked example, q = (1, 2) and k = (0.5, -1), rotated by the
reference's ``apply_rope`` (solutions/16_rope) in two panels: the query at
position 2 and the key at 0, then the query at 7 and the key at 5. Both
vectors turn further in the second panel, the angle between them stays,
and so does their dot product: the score depends on i - j only. The
figure is plain SVG text, the same bytes on every run; ``--check``
compares with the committed file (exit 1 on a difference).
"""
from __future__ import annotations

import argparse
import math
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from coursekit.loader import load_module  # noqa: E402

OUT = Path(__file__).resolve().parent / "rope_rotation.svg"
QUERY, KEY = (1.0, 2.0), (0.5, -1.0)
PANELS = ((2, 0), (7, 5))                 # (query position, key position)
SIZE, SCALE = 360, 55.0                   # one panel's width and height; pixels per unit
COLOURS = {"q": "#c0392b", "k": "#2e6da4"}


def reference():
    """The reference rope.py, in a copy of its exercise folder (the modules it imports)."""
    work = Path(tempfile.mkdtemp(prefix="rope-figure-"))
    shutil.copytree(REPO / "exercises" / "16_rope", work / "16_rope")
    shutil.copy(REPO / "solutions" / "16_rope" / "rope.py", work / "16_rope" / "rope.py")
    return load_module(work / "16_rope", "rope")


def rotated_pairs(rope) -> list[dict]:
    """For each panel: the rotated query and key (head_dim 2) and their dot product."""
    found = []
    for qp, kp in PANELS:
        q = rope.apply_rope(torch.tensor(QUERY, dtype=torch.float64).reshape(1, 1, 1, 2), torch.tensor([qp]))
        k = rope.apply_rope(torch.tensor(KEY, dtype=torch.float64).reshape(1, 1, 1, 2), torch.tensor([kp]))
        found.append({"positions": (qp, kp), "q": tuple(q.flatten().tolist()), "k": tuple(k.flatten().tolist()),
                      "score": float((q * k).sum())})
    return found


def _arrow(x0: float, y0: float, v: tuple[float, float], colour: str, dashed: bool = False) -> str:
    """An arrow from the panel's centre to v (y up), with a head."""
    x1, y1 = x0 + SCALE * v[0], y0 - SCALE * v[1]
    angle = math.atan2(y1 - y0, x1 - x0)
    head = [(x1 - 9 * math.cos(angle + s), y1 - 9 * math.sin(angle + s)) for s in (0.4, -0.4)]
    dash = ' stroke-dasharray="4 3" opacity="0.45"' if dashed else ""
    return (f'<line x1="{x0:.1f}" y1="{y0:.1f}" x2="{x1:.1f}" y2="{y1:.1f}" stroke="{colour}" stroke-width="2"{dash}/>'
            f'<polygon points="{x1:.1f},{y1:.1f} {head[0][0]:.1f},{head[0][1]:.1f} {head[1][0]:.1f},{head[1][1]:.1f}" '
            f'fill="{colour}"{dash}/>')


def _arc(x0: float, y0: float, a: tuple[float, float], b: tuple[float, float]) -> str:
    """The smaller angle between a and b, drawn at radius 28."""
    start, end = math.atan2(a[1], a[0]), math.atan2(b[1], b[0])
    if (end - start) % (2 * math.pi) > math.pi:
        start, end = end, start
    large = 0
    p0 = (x0 + 28 * math.cos(start), y0 - 28 * math.sin(start))
    p1 = (x0 + 28 * math.cos(end), y0 - 28 * math.sin(end))
    return (f'<path d="M {p0[0]:.1f} {p0[1]:.1f} A 28 28 0 {large} 0 {p1[0]:.1f} {p1[1]:.1f}" fill="none" '
            f'stroke="#555" stroke-width="1.2"/>')


def svg(pairs: list[dict]) -> str:
    width, height = SIZE * len(pairs), SIZE + 80
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="13">',
             f'<rect width="{width}" height="{height}" fill="white"/>']
    for index, pair in enumerate(pairs):
        x0, y0 = SIZE * index + SIZE / 2, 60 + SIZE / 2 - 10
        qp, kp = pair["positions"]
        parts.append(f'<text x="{x0:.1f}" y="20" text-anchor="middle">query at position {qp}, key at position {kp}</text>'
                     f'<text x="{x0:.1f}" y="38" text-anchor="middle">query 在位置 {qp}，key 在位置 {kp}</text>')
        parts.append(f'<line x1="{x0 - 135:.1f}" y1="{y0:.1f}" x2="{x0 + 135:.1f}" y2="{y0:.1f}" stroke="#ccc"/>'
                     f'<line x1="{x0:.1f}" y1="{y0 - 125:.1f}" x2="{x0:.1f}" y2="{y0 + 125:.1f}" stroke="#ccc"/>')
        parts.append(_arrow(x0, y0, QUERY, COLOURS["q"], dashed=True) + _arrow(x0, y0, KEY, COLOURS["k"], dashed=True))
        parts.append(_arc(x0, y0, pair["k"], pair["q"]))
        parts.append(_arrow(x0, y0, pair["q"], COLOURS["q"]) + _arrow(x0, y0, pair["k"], COLOURS["k"]))
        for name, label in (("q", f"R({qp}θ) q"), ("k", f"R({kp}θ) k")):
            v = pair[name]
            unit = (v[0] / math.hypot(*v), v[1] / math.hypot(*v))     # past the arrow's tip
            lx, ly = x0 + SCALE * v[0] + 22 * unit[0], y0 - SCALE * v[1] - 22 * unit[1] + 4
            parts.append(f'<text x="{lx:.1f}" y="{ly:.1f}" fill="{COLOURS[name]}" text-anchor="middle">{label}</text>')
        parts.append(f'<text x="{x0:.1f}" y="{y0 + 148:.1f}" text-anchor="middle">'
                     f'score (R q)·(R k) = {pair["score"]:.4f}（分数）</text>')
    parts.append(f'<text x="{width / 2:.1f}" y="{height - 30}" text-anchor="middle" fill="#444">dashed: q = (1, 2) '
                 'and k = (0.5, -1) before the rotation (θ = 1); both turn by position × θ, the angle between them '
                 'stays</text>')
    parts.append(f'<text x="{width / 2:.1f}" y="{height - 10}" text-anchor="middle" fill="#444">虚线为旋转前的 '
                 'q = (1, 2) 和 k = (0.5, -1)（θ = 1）；两者都转过 位置 × θ，它们之间的夹角不变</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def make() -> str:
    torch.set_num_threads(1)
    return svg(rotated_pairs(reference()))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the committed figure instead of writing it")
    args = parser.parse_args(argv)
    text = make()
    if args.check:
        same = OUT.is_file() and OUT.read_text(encoding="utf-8") == text
        print(f"{OUT.name}: {'up to date' if same else 'differs: run docs/figures/make_rope_figure.py'}")
        return 0 if same else 1
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
