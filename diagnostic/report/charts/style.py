"""The charts' look: colours, the matplotlib settings that make every SVG byte-identical across
runs, a bare figure, and the SVG as a data: URI."""

from __future__ import annotations

import base64
import io
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "BLUE",
    "GREEN",
    "GREY",
    "INK",
    "ORANGE",
    "PALETTE",
    "data_uri",
    "figure",
    "palette",
    "style",
    "to_svg",
]

# A calm palette that survives grey-scale printing: baseline grey, speculation blue, accent.
GREY = "#8a8f98"
BLUE = "#2f5d8a"
ORANGE = "#c8742b"
GREEN = "#3f7f5f"
INK = "#2b2f36"
PALETTE = (BLUE, ORANGE, GREEN, "#7a4f9a", "#a23b3b", "#4f8a8b")


# tab20's hues PALETTE lacks first (brown, pink, olive, cyan), then its light shades; its
# greys (14, 15) never, as grey is the baseline's.
_TAB20_ORDER = (10, 12, 16, 18, 1, 3, 5, 7, 9, 11, 13, 17, 19, 0, 2, 4, 6, 8)


def palette(n: int) -> list[str]:
    """`n` distinct colours, never the baseline's grey: the calm PALETTE first, then tab20's
    other hues and light shades, and past those `n` evenly spaced on a continuous colormap."""
    if n <= len(PALETTE):
        return list(PALETTE[:n])
    from matplotlib import colormaps
    from matplotlib.colors import to_hex

    tab20 = colormaps["tab20"]
    colours = [*PALETTE, *(to_hex(tab20(i)) for i in _TAB20_ORDER)]
    if n <= len(colours):
        return colours[:n]
    cmap = colormaps["turbo"]
    return [to_hex(cmap(i / (n - 1))) for i in range(n)]


_RC: Any = {
    # A fixed salt and no dates make the SVG byte-identical across runs (reproducible reports).
    "svg.hashsalt": "diagnose-report",
    # Text stays text: the PDF uses the document's DejaVu font and stays searchable.
    "svg.fonttype": "none",
    "font.family": "DejaVu Sans",
    "font.size": 8,
    "axes.edgecolor": "#b9bec6",
    "axes.labelcolor": INK,
    "axes.titlesize": 9,
    "axes.titleweight": "bold",
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "axes.axisbelow": True,
    "grid.color": "#e4e7eb",
    "grid.linewidth": 0.6,
    "xtick.color": INK,
    "ytick.color": INK,
    "legend.frameon": False,
    "legend.fontsize": 7,
}


def style() -> AbstractContextManager[Any]:
    """The report's matplotlib settings, for the figures drawn inside it."""
    # matplotlib is imported on first use: `diagnose --help` should not pay for it.
    import matplotlib

    return matplotlib.rc_context(_RC)


def figure(width_in: float, height_in: float) -> tuple[Figure, Axes]:
    """A figure of this size in inches, with one axes."""
    # A bare Figure (no pyplot): no global figure registry and no GUI backend to select;
    # savefig writes SVG through matplotlib's own SVG backend.
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width_in, height_in))
    return fig, fig.add_subplot(1, 1, 1)


def to_svg(fig: Figure) -> str:
    """The figure as SVG text, cropped to what it draws, with no date."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    return buf.getvalue()


def data_uri(svg: str) -> str:
    """An SVG as a data: URI, so the HTML embeds it without any markup marked safe."""
    return "data:image/svg+xml;base64," + base64.b64encode(svg.encode("utf-8")).decode("ascii")
