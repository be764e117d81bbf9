"""The HTML report: every section for every run, one page (report.html) next to its PNGs."""
import datetime
import html
import os

from common import AnalysisError, Section, Table

CSS = """body{font-family:sans-serif;max-width:1250px;margin:2em auto;color:#222}
h1{font-size:1.6em}h2{border-bottom:1px solid #ccc;margin-top:2em}
img{max-width:100%;border:1px solid #eee}figure{margin:1em 0}
figcaption{font-size:.85em;color:#555}table{border-collapse:collapse;margin:1em 0;font-size:.85em}
caption{text-align:left;font-weight:bold;padding:.3em 0}td,th{border:1px solid #ccc;padding:2px 6px;
text-align:right}th{background:#f4f4f4}.note{font-size:.85em;color:#555}
.skip{color:#a40;font-style:italic}nav li{font-size:.9em}"""


def run_status(run):
    """'complete' or a sentence saying where a live or stopped run is."""
    m = run.metrics()
    want = int(run.config["train"]["steps"])
    last = int(m["step"][-1]) if len(m["step"]) else 0
    if last >= want:
        return "complete"
    return (f"step {last} of {want}: still being written, stopped, or crashed (the report "
            f"shows the rows committed so far)")


def overview_section(runs, labels):
    sec = Section("Runs", "runs")
    t = Table("Runs in this report", ["run", "file", "scheme", "model", "grid", "lcr",
                                      "started", "status"])
    for run, lab in zip(runs, labels):
        p = run.provenance
        t.add(lab, run.path, run.prior_info().get("scheme", "?"), str(p.get("model", "")),
              f"dp {p.get('dp')} x cp {p.get('cp')}",
              f"{p.get('lcr_version', '?')} ({p.get('git_revision', '?')})",
              str(p.get("start_time", "")), run_status(run))
    sec.table(t)
    return sec


def guarded(title, anchor, make, *args):
    """make(*args) -> Section; an AnalysisError becomes a skipped section that says why."""
    try:
        return make(*args)
    except AnalysisError as e:
        return Section(title, anchor).skip(str(e))


def render(sections, out_dir, title):
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}"
             f"</title><style>{CSS}</style></head><body><h1>{html.escape(title)}</h1>",
             f"<p class='note'>Written by analysis/lcr-analyze on "
             f"{datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}. "
             f"Definitions: docs/analysis.md.</p><nav><ul>"]
    for s in sections:
        tag = " (skipped)" if s.skipped else ""
        parts.append(f"<li><a href='#{s.anchor}'>{html.escape(s.title)}</a>{tag}</li>")
    parts.append("</ul></nav>")
    for s in sections:
        parts.append(f"<h2 id='{s.anchor}'>{html.escape(s.title)}</h2>")
        if s.skipped:
            parts.append(f"<p class='skip'>Skipped: {html.escape(s.skipped)}</p>")
            continue
        for item in s.items:
            if item[0] == "figure":
                parts.append(f"<figure><img src='{html.escape(item[1])}' alt=''><figcaption>"
                             f"{html.escape(item[2])}</figcaption></figure>")
            elif item[0] == "table":
                parts.append(item[1].to_html())
            else:
                parts.append(f"<p class='note'>{html.escape(item[1])}</p>")
    parts.append("</body></html>\n")
    path = os.path.join(out_dir, "report.html")
    with open(path, "w") as f:
        f.write("\n".join(parts))
    return path
