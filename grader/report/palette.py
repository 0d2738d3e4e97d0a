"""The report's colours, shared by the class figures (``plots.py``) and the
students' pages (``svg.py``), without matplotlib: `grader grade` draws its
report without importing it (~0.8 s of start-up, issue 19)."""
from __future__ import annotations

COLOR = "#3b6ea8"        # the class figures' blue, and "you" on a student's page
PITFALL_COLOR = "#c0504d"

# matplotlib's viridis at 17 even steps (0, 1/16, ..., 1), interpolated
# linearly between them: within a shade of the full 256-colour map.
_VIRIDIS_STEPS = (
    "#440154", "#48186a", "#472d7b", "#424086", "#3b528b", "#33638d", "#2c728e", "#26828e", "#21918c",
    "#1fa088", "#28ae80", "#3fbc73", "#5ec962", "#84d44b", "#addc30", "#d8e219", "#fde725",
)
_STEPS_RGB = [tuple(int(h[i:i + 2], 16) for i in (1, 3, 5)) for h in _VIRIDIS_STEPS]


def viridis(value: float) -> str:
    """The viridis colour of ``value`` in [0, 1] (clamped), as ``#rrggbb``."""
    position = min(max(value, 0.0), 1.0) * (len(_STEPS_RGB) - 1)
    low = min(int(position), len(_STEPS_RGB) - 2)
    t = position - low
    rgb = (round(a + (b - a) * t) for a, b in zip(_STEPS_RGB[low], _STEPS_RGB[low + 1]))
    return "#" + "".join(f"{channel:02x}" for channel in rgb)
