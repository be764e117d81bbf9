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
    """'complete', or where a live or stopped run is: `lcr train` holds the run directory's
    lock while it writes (RunFile.writer_active), so running and stopped are told apart."""
    m = run.metrics()
    want = int(run.config["train"]["steps"])
    last = int(m["step"][-1]) if len(m["step"]) else 0
    if last >= want and not run.writer_active():
        return "complete"
    if run.writer_active():
        return f"running: step {last} of {want} (the report shows the rows committed so far)"
    return (f"stopped at step {last} of {want}: no process writes it (stopped for a requeue, "
            f"or crashed; `lcr train` with its config resumes it)")


def flat_config(cfg, prefix=""):
    """{"train.lr": 0.003, ...} of a nested config dict."""
    out = {}
    for k, v in cfg.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flat_config(v, key + "."))
        else:
            out[key] = v
    return out


def overview_section(runs, labels):
    sec = Section("Runs", "runs")
    t = Table("Runs in this report", ["run", "scheme", "model", "seq_len", "batch x dp",
                                      "steps", "lr", "grid", "resumes", "lcr", "started",
                                      "status", "file"])
    for run, lab in zip(runs, labels):
        p = run.provenance
        tr = run.config["train"]
        t.add(lab, run.prior_info().get("scheme", "?"), str(p.get("model", "")),
              str(tr["seq_len"]), f"{tr['batch']} x {p.get('dp')}", str(tr["steps"]),
              f"{tr['lr']:g}", f"dp {p.get('dp')} x cp {p.get('cp')}",
              str(p.get("resume_count", 0)),
              f"{p.get('lcr_version', '?')} ({p.get('git_revision', '?')})",
              str(p.get("start_time", "")), run_status(run), run.path)
    sec.table(t)
    if len(runs) > 1:
        flat = [flat_config(r.config) for r in runs]
        keys = sorted({k for f in flat for k in f})
        differ = [k for k in keys if len({repr(f.get(k)) for f in flat}) > 1
                  and not k.startswith("run.")]
        if differ:
            d = Table("Where the runs' configs differ (run.* left out)", ["key", *labels])
            for k in differ:
                d.add(k, *[str(f.get(k, "(absent)")) for f in flat])
            sec.table(d)
        else:
            sec.note("The runs' configs are the same but for run.*.")
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
