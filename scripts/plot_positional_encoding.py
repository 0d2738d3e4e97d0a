"""Draw the figure of exercise 07: a few columns of the sinusoidal table.

    python scripts/plot_positional_encoding.py

writes exercises/07_positional_encoding/pe_columns.png from the reference
solution (like the figure of seed 002: d_model = 32, positions 0-59,
columns 6 to 9). Rerun it when the reference changes.
"""
from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display needed
import matplotlib.pyplot as plt  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's coursekit, even if another is installed
from coursekit.loader import load_module  # noqa: E402
FIGURE = ROOT / "exercises" / "07_positional_encoding" / "pe_columns.png"


def main(d_model: int = 32, num_steps: int = 60, columns: range = range(6, 10)) -> Path:
    reference = load_module(ROOT / "solutions" / "07_positional_encoding", "positional_encoding")
    table = reference.sinusoidal_table(num_steps, d_model)
    fig, ax = plt.subplots(figsize=(7.5, 2.6), dpi=100)
    styles = ["-", "--", "-.", ":"]
    for k, column in enumerate(columns):
        kind = "sin" if column % 2 == 0 else "cos"
        ax.plot(range(num_steps), table[:, column].numpy(), styles[k % len(styles)],
                label=f"col {column} ({kind}, i = {column // 2})")
    ax.set_xlabel("row (position p)")
    ax.set_ylabel("PE[p, col]")
    ax.set_title(f"sinusoidal_table({num_steps}, {d_model}): columns {columns.start}-{columns.stop - 1}", fontsize=9)
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
    ax.grid(alpha=0.3)
    fig.tight_layout()
    # No software/version metadata: the same table gives the same bytes.
    fig.savefig(FIGURE, metadata={"Software": None})
    plt.close(fig)
    return FIGURE


if __name__ == "__main__":
    print(f"wrote {main().relative_to(ROOT)}")
