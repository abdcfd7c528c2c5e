"""The report as one self-contained HTML file: it opens offline, with interactive Vega-Lite charts.

The Vega, Vega-Lite and vega-embed JavaScript comes inlined from vl-convert-python's bundle (no CDN, no
network). Every text that came from the data (study, model and benchmark names, clinicians' ids, output
excerpts) goes through :func:`html.escape`; chart specs sit in ``<script type="application/json">``
blocks with ``<`` written as ``\\u003c``, so no text can close the block or start a tag.
"""

from __future__ import annotations

import json
from functools import lru_cache
from html import escape

import altair as alt
import pandas as pd

from medhelm_core.figures.displays import agreement_display, leniency_display
from medhelm_core.format import number
from medhelm_core.report.alignment import alignment_sections
from medhelm_core.report.content import (
    CHART_TITLES,
    NOTHING_TO_SHOW,
    ReportContent,
    disagreements_display,
    headline_display,
)
from medhelm_core.report.method import method_paragraphs, recompute_snippet

#: the Vega-Lite version (major.minor) the installed Altair writes; the inlined bundle must match it
VEGA_LITE_VERSION = ".".join(alt.SCHEMA_VERSION.lstrip("v").split(".")[:2])
_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 2rem auto; max-width: 1100px;
       color: #222; line-height: 1.45; padding: 0 1rem; }
h1 { font-size: 1.6rem; margin-bottom: .2rem; } h2 { margin-top: 2rem; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; font-size: .85rem; margin: .5rem 0 1rem; }
th, td { border: 1px solid #ddd; padding: .25rem .45rem; text-align: left; vertical-align: top; }
th { background: #f4f4f4; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.nowrap { white-space: nowrap; }
.meta { color: #555; } .recorded { background: #fff4d6; border: 1px solid #e0b84c; padding: .4rem .7rem; }
.chart { margin: 1rem 0; } pre { background: #f6f6f6; padding: .6rem; overflow-x: auto; white-space: pre-wrap; }
details summary { cursor: pointer; }
"""
_NOWRAP = {"95% CI", "comparison", "benchmark"}
_NUMERIC = {"ICC(3,k)", "n", "n (of)", "r", "rho", "kappa", "estimate", "icc", "jury", "clinician mean", "difference"}


@lru_cache(maxsize=2)
def vega_bundle(vl_version: str = VEGA_LITE_VERSION) -> str:
    """vega-embed, Vega-Lite and Vega as one script (from vl-convert-python; about 0.9 MB, built once)."""
    import vl_convert

    return vl_convert.javascript_bundle(vl_version=vl_version)


def table_html(frame: pd.DataFrame, numeric: set[str] | None = None) -> str:
    """A DataFrame of strings as an HTML table; every cell escaped."""
    numeric = _NUMERIC if numeric is None else numeric
    head = "".join(f"<th>{escape(str(c))}</th>" for c in frame.columns)
    rows = []
    for record in frame.itertuples(index=False):
        cells = []
        for name, value in zip(frame.columns, record, strict=True):
            css = ' class="num"' if name in numeric else ' class="nowrap"' if name in _NOWRAP else ""
            cells.append(f"<td{css}>{escape('' if value is None else str(value))}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _json_for_script(value: object) -> str:
    return (
        json.dumps(value, ensure_ascii=False, allow_nan=False)
        .replace("<", "\\u003c")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def _chart(name: str, content: ReportContent) -> str:
    if name not in content.charts:
        return ""
    return f'<div class="chart" id="chart-{escape(name)}" role="img" aria-label="{escape(CHART_TITLES[name])}"></div>'


def render_html(content: ReportContent, bundle_files: dict[str, int] | None = None) -> str:
    """The whole report as an HTML document (a string), with the JS bundle and chart specs inlined."""
    study, data = content.study, content.data
    run = data.jury_run
    esc = escape
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>Calibration report: {esc(study['name'])}</title>",
        f"<style>{_STYLE}</style>",
        f'<script type="text/javascript">\n{vega_bundle()}\n</script>',
        "</head><body>",
        f"<h1>Calibration report: {esc(study['title'] or study['name'])}</h1>",
        f'<p class="meta">Study {esc(study["name"])} · generated {esc(content.generated_at)} · protocol '
        f"{esc(content.options.protocol)} · pooled over {esc(', '.join(content.benchmarks))} · models "
        f"{esc(', '.join(content.options.models) or 'all')} · database schema {esc(str(content.schema_revision))}</p>",
        f"<p>{esc(study['description'])}</p>" if study.get("description") else "",
        f'<p class="meta">{esc(content.jury_label)}</p>',
    ]
    if run is not None and run.recorded:
        parts.append(
            '<p class="recorded">The jury scores are <strong>recorded</strong>: imported from elsewhere '
            "(such as MedHELM's published jury means), not judges called by this app.</p>"
        )
    for heading, sentences in content.verdict_lines:
        parts += [f"<h2>{esc(heading)}</h2>", "<ul>", *(f"<li>{esc(s)}</li>" for s in sentences), "</ul>"]
    if content.nothing_to_show:
        parts.append(f'<p class="recorded">{esc(NOTHING_TO_SHOW)}</p>')
    pooled = content.headline[
        (content.headline["benchmark"] == "pooled") & (content.headline["criterion"] == "composite")
    ]
    parts += [
        "<h2>Headline agreement</h2>",
        "<p>Each rater with the clinicians on the composite, pooled over the benchmarks: ICC(C,k) of z-scored sides "
        "as MedHELM (with r and rho beside it), and the clinicians' agreement from every clinician (ICC(1), the "
        "ceiling) beside the paper's one pair; n is the items used of those the figure could use. The full "
        "table below gives each benchmark and criterion.</p>",
        table_html(headline_display(pooled)),
        _chart("icc", content),
        "<details><summary>Per benchmark and criterion</summary>",
        table_html(headline_display(content.headline)),
        "</details>",
        "<h2>Method</h2>",
        *(f"<h3>{esc(h)}</h3><p>{esc(p)}</p>" for h, p in method_paragraphs(content)),
        f"<pre><code>{esc(recompute_snippet(content))}</code></pre>",
    ]
    if "scatter" in content.charts:
        lim = content.limits
        parts += [
            f"<h2>{CHART_TITLES['scatter']}</h2>",
            _chart("scatter", content),
            _chart("bland_altman", content),
            f"<p>Bias {number(lim['bias'], 2)}, 95% limits of agreement {number(lim['loa_low'], 2)} to "
            f"{number(lim['loa_high'], 2)} (n = {lim['n_items']} items).</p>",
            "<h3>Largest disagreements</h3>",
            table_html(disagreements_display(content.disagreements)),
        ]
    if "judges" in content.charts:
        judges = content.judges[
            (content.judges["benchmark"] == "pooled") & (content.judges["criterion"] == "composite")
        ]
        parts += [
            f"<h2>{CHART_TITLES['judges']}</h2>",
            _chart("judges", content),
            table_html(
                pd.DataFrame(
                    {
                        "judge": judges["judge"],
                        "ICC(3,k)": judges["icc"].map(number),
                        "n": judges["n_items"].astype(str),
                    }
                )
            ),
        ]
    for section in alignment_sections(content):
        parts += [f"<h2>{esc(section.heading)}</h2>", f"<p>{esc(section.text)}</p>" if section.text else "",
                  _chart(section.chart, content) if section.chart else "",
                  table_html(section.table, numeric=set()) if section.table is not None else ""]
    if "clinicians" in content.charts:
        parts += [
            f"<h2>{CHART_TITLES['clinicians']}</h2>",
            _chart("clinicians", content),
            table_html(leniency_display(content.leniency, content.data.speed)),
        ]
    if "distribution" in content.charts:
        parts += [f"<h2>{CHART_TITLES['distribution']}</h2>", _chart("distribution", content)]
    parts += [
        "<h2>Every figure</h2>",
        "<details><summary>The agreement engine's whole table</summary>",
        table_html(agreement_display(content.agreement)),
        "</details>",
        "<h2>Data bundle and versions</h2>",
    ]
    if bundle_files:
        parts.append(
            table_html(pd.DataFrame({"file": list(bundle_files), "rows": [str(v) for v in bundle_files.values()]}))
        )
    parts.append(
        table_html(pd.DataFrame({"package": list(content.versions), "version": list(content.versions.values())}))
    )
    specs = {name: chart.to_dict() for name, chart in content.charts.items()}
    parts += [
        f'<script type="application/json" id="chart-specs">{_json_for_script(specs)}</script>',
        "<script>\n(function () {\n"
        "  var specs = JSON.parse(document.getElementById('chart-specs').textContent);\n"
        "  Object.keys(specs).forEach(function (name) {\n"
        "    vegaEmbed('#chart-' + name, specs[name], {actions: false, renderer: 'svg'}).catch(console.error);\n"
        "  });\n})();\n</script>",
        "</body></html>",
    ]
    return "\n".join(p for p in parts if p)
