"""Shared pieces of the analysis tool: errors, tables, figure saving, report sections."""
import csv
import html
import io
import json
import math
import os

import matplotlib

matplotlib.use("Agg")  # files only; no display on clusters
import matplotlib.pyplot as plt  # noqa: E402


class AnalysisError(ValueError):
    """Bad user input for an analysis (wrong kind of run, missing data); exit code 2."""


def fmt(v, spec):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, float) and math.isinf(v):
        return "inf"
    return format(v, spec) if spec else str(v)


class Table:
    """Rows of values with one format spec per column; renders as text, HTML, CSV, JSON."""

    def __init__(self, title, columns, formats=None, note=""):
        self.title, self.columns, self.note = title, list(columns), note
        self.formats = list(formats) if formats else [""] * len(self.columns)
        self.rows = []

    def add(self, *values):
        if len(values) != len(self.columns):
            raise ValueError(f"table '{self.title}': {len(values)} values for "
                             f"{len(self.columns)} columns")
        self.rows.append(list(values))

    def cells(self):
        return [[fmt(v, f) for v, f in zip(r, self.formats)] for r in self.rows]

    def to_text(self):
        cells = self.cells()
        w = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(self.columns)]
        line = lambda r: "  ".join(x.rjust(w[i]) for i, x in enumerate(r))  # noqa: E731
        out = [self.title, line(self.columns)] + [line(r) for r in cells]
        if self.note:
            out.append(self.note)
        return "\n".join(out)

    def to_html(self):
        head = "".join(f"<th>{html.escape(c)}</th>" for c in self.columns)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(x)}</td>" for x in r) + "</tr>"
                       for r in self.cells())
        note = f"<p class='note'>{html.escape(self.note)}</p>" if self.note else ""
        return (f"<table><caption>{html.escape(self.title)}</caption><thead><tr>{head}</tr>"
                f"</thead><tbody>{body}</tbody></table>{note}")

    def to_csv(self):
        s = io.StringIO()
        w = csv.writer(s)
        w.writerow(self.columns)
        for r in self.rows:
            w.writerow(["" if v is None else v for v in r])
        return s.getvalue()

    def to_records(self):
        return [dict(zip(self.columns, r)) for r in self.rows]


class Section:
    """One part of the report: figures, tables and notes, or the reason it was skipped."""

    def __init__(self, title, anchor):
        self.title, self.anchor = title, anchor
        self.items = []  # ("figure", relpath, caption) | ("table", Table) | ("note", text)
        self.skipped = None

    def figure(self, relpath, caption):
        self.items.append(("figure", relpath, caption))

    def table(self, t):
        self.items.append(("table", t))

    def note(self, text):
        self.items.append(("note", text))

    def skip(self, reason):
        self.skipped = reason
        return self

    def files(self):
        return [i[1] for i in self.items if i[0] == "figure"]


DPI = 100.0  # lcr-analyze --dpi


def save_figure(fig, out_dir, name, scale=1.0):
    """Writes fig to out_dir/name (PNG at DPI x scale), closes it, returns the name."""
    os.makedirs(out_dir, exist_ok=True)
    fig.savefig(os.path.join(out_dir, name), dpi=DPI * scale, bbox_inches="tight")
    plt.close(fig)
    return name


def depth_length_map(ax, grid, lengths, depths, fontsize=7, annotate_max=None):
    """Draws a [depth, length] score grid in [0, 1] on ax (passkey, long-context needles),
    each cell's value written in it unless there are more than annotate_max cells."""
    import numpy as np

    im = ax.imshow(grid, cmap="viridis", vmin=0, vmax=1, aspect="auto", origin="upper")
    if annotate_max is None or len(depths) * len(lengths) <= annotate_max:
        for i in range(len(depths)):
            for j in range(len(lengths)):
                if not np.isnan(grid[i, j]):
                    ax.text(j, i, f"{grid[i, j]:.2f}", ha="center", va="center",
                            fontsize=fontsize, color="white" if grid[i, j] < 0.6 else "black")
    ax.set_xticks(range(len(lengths)), [str(L) for L in lengths], fontsize=7)
    ax.set_yticks(range(len(depths)), [f"{D:.2f}" for D in depths], fontsize=7)
    return im


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=1, allow_nan=True)
        f.write("\n")


def slug(text):
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in text)
