"""The report as a PDF with the same content as the HTML: tables as text, charts as PNG images.

Charts are rendered by vl-convert-python (its own Vega engine and fonts, no browser); the document is
laid out with fpdf2. Text uses DejaVu Sans when a copy is found (Debian's fonts-dejavu, or the one
matplotlib ships) so any script prints; otherwise the core Helvetica font, with characters it cannot
show replaced, so a PDF is always produced.
"""

from __future__ import annotations

import importlib.util
import logging
from io import BytesIO
from pathlib import Path

import pandas as pd
from fpdf import FPDF
from fpdf.fonts import FontFace

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

_log = logging.getLogger(__name__)
_FONT_CANDIDATES = (Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"),)
_PNG_SCALE = 2.0


def _dejavu() -> Path | None:
    found = [p for p in _FONT_CANDIDATES if p.exists()]
    spec = importlib.util.find_spec("matplotlib")
    if spec and spec.submodule_search_locations:
        bundled = Path(next(iter(spec.submodule_search_locations))) / "mpl-data" / "fonts" / "ttf" / "DejaVuSans.ttf"
        if bundled.exists():
            found.append(bundled)
    return found[0] if found else None


class _Report(FPDF):
    def __init__(self, footer_text: str) -> None:
        super().__init__(orientation="portrait", unit="mm", format="A4")
        self.footer_text = footer_text
        font = _dejavu()
        if font is not None:
            self.add_font("body", "", str(font))
            bold = font.with_name("DejaVuSans-Bold.ttf")
            self.add_font("body", "B", str(bold if bold.exists() else font))
            mono = font.with_name("DejaVuSansMono.ttf")
            self.add_font("mono", "", str(mono if mono.exists() else font))
            self.family, self.mono, self.unicode = "body", "mono", True
        else:
            self.family, self.mono, self.unicode = "helvetica", "courier", False
        self.set_auto_page_break(auto=True, margin=15)
        self.set_margins(14, 14, 14)

    def clean(self, text: object) -> str:
        value = "" if text is None else str(text)
        return value if self.unicode else value.encode("latin-1", "replace").decode("latin-1")

    def footer(self) -> None:
        self.set_y(-12)
        self.set_font(self.family, "", 7)
        self.set_text_color(120)
        self.cell(0, 5, self.clean(f"{self.footer_text} · page {self.page_no()}/{{nb}}"), align="C")
        self.set_text_color(0)


def _heading(pdf: _Report, text: str, size: int = 13, keep: float = 0) -> None:
    """A heading; ``keep`` mm of what follows must fit on the same page, so a heading never ends a page."""
    if pdf.get_y() + size * 0.5 + 3 + keep > pdf.h - pdf.b_margin:
        pdf.add_page()
    pdf.ln(3)
    pdf.set_font(pdf.family, "B", size)
    pdf.multi_cell(0, size * 0.5, pdf.clean(text), align="L", new_x="LMARGIN", new_y="NEXT")
    pdf.set_font(pdf.family, "", 9)


def _paragraph(pdf: _Report, text: str, size: float = 9) -> None:
    pdf.set_font(pdf.family, "", size)
    pdf.multi_cell(0, size * 0.48, pdf.clean(text), align="L", new_x="LMARGIN", new_y="NEXT")
    pdf.ln(1)


def _code(pdf: _Report, text: str, size: float = 7.5) -> None:
    pdf.set_font(pdf.mono, "", size)
    pdf.set_fill_color(244, 244, 244)
    pdf.multi_cell(0, size * 0.5, pdf.clean(text), align="L", fill=True, new_x="LMARGIN", new_y="NEXT")
    pdf.set_font(pdf.family, "", 9)
    pdf.ln(1)


def _table(pdf: _Report, frame: pd.DataFrame, size: float = 6.5, widths: tuple[float, ...] | None = None) -> None:
    if frame.empty:
        _paragraph(pdf, "(no rows)")
        return
    pdf.set_font(pdf.family, "", size)
    style = FontFace(emphasis="BOLD", fill_color=(235, 235, 235))
    with pdf.table(
        col_widths=widths,
        headings_style=style,
        line_height=size * 0.5,
        text_align="LEFT",
        padding=0.6,
        borders_layout="SINGLE_TOP_LINE",
    ) as table:
        table.row([pdf.clean(c) for c in frame.columns])
        for record in frame.itertuples(index=False):
            table.row([pdf.clean(v) for v in record])
    pdf.ln(2)


def _chart(pdf: _Report, content: ReportContent, name: str, heading: str | None = None) -> None:
    """A chart as a PNG at its natural size (at most the page width), with its heading on the same page.

    A chart Vega cannot draw (an empty or all-n/a selection can leave it no size or no scale) becomes a line saying
    so: its figures are in the tables and the data bundle, and the rest of the report is still written.
    """
    import vl_convert

    chart = content.charts.get(name)
    if chart is None:
        return
    try:
        png = vl_convert.vegalite_to_png(chart.to_json(), scale=_PNG_SCALE)
    except ValueError as exc:  # vl-convert reports every failure as a ValueError
        _log.warning("report chart %s not drawn: %s", name, str(exc).splitlines()[0] if str(exc) else exc)
        if heading:
            _heading(pdf, heading)
        _paragraph(pdf, f"({CHART_TITLES.get(name, name)}: nothing to draw for this selection; the figures are in "
                        "the tables and the data bundle.)")
        return
    width_px, height_px = _png_size(png)
    width = min(pdf.epw, width_px / _PNG_SCALE * 0.26)  # ~96 dpi, 0.26 mm per CSS pixel
    height = width * height_px / width_px
    if heading:
        _heading(pdf, heading, keep=height)
    elif pdf.get_y() + height > pdf.h - pdf.b_margin:
        pdf.add_page()
    pdf.image(BytesIO(png), w=width, h=height, alt_text=CHART_TITLES.get(name, name))
    pdf.ln(2)


def _png_size(png: bytes) -> tuple[int, int]:
    # The IHDR chunk holds width and height as big-endian integers at bytes 16-24.
    return int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")


def render_pdf(content: ReportContent) -> bytes:
    """The report as PDF bytes."""
    study = content.study
    pdf = _Report(f"Calibration report: {study['name']} ({content.generated_at})")
    pdf.set_title(pdf.clean(f"Calibration report: {study['name']}"))
    pdf.set_creator("MedHELM Calibrate")
    pdf.add_page()
    _heading(pdf, f"Calibration report: {study['title'] or study['name']}", 16)
    _paragraph(
        pdf,
        f"Study {study['name']} · generated {content.generated_at} · protocol {content.options.protocol}"
        f" · pooled over {', '.join(content.benchmarks)} · models "
        f"{', '.join(content.options.models) or 'all'} · database schema {content.schema_revision}",
        8,
    )
    if study.get("description"):
        _paragraph(pdf, study["description"])
    _paragraph(pdf, content.jury_label, 8)
    run = content.data.jury_run
    if run is not None and run.recorded:
        _paragraph(
            pdf,
            "The jury scores are RECORDED: imported from elsewhere (such as MedHELM's published jury "
            "means), not judges called by this app.",
        )
    for heading, sentences in content.verdict_lines:
        _heading(pdf, heading, 12, keep=12)
        for sentence in sentences:
            _paragraph(pdf, f"- {sentence}")
    if content.nothing_to_show:
        _paragraph(pdf, NOTHING_TO_SHOW, 10)
    headline = content.headline
    pooled = headline[(headline["benchmark"] == "pooled") & (headline["criterion"] == "composite")]
    _heading(pdf, "Headline agreement")
    _table(pdf, headline_display(pooled), 7, (24, 14, 14, 16, 12, 20, 12, 10, 10, 10, 12, 28))
    _chart(pdf, content, "icc")
    _heading(pdf, "Per benchmark and criterion", 11, keep=20)
    _table(pdf, headline_display(headline), 6, (24, 14, 14, 16, 12, 20, 12, 10, 10, 10, 12, 28))
    _heading(pdf, "Method")
    for head, text in method_paragraphs(content):
        _heading(pdf, head, 10, keep=12)
        _paragraph(pdf, text)
    _code(pdf, recompute_snippet(content))
    if "scatter" in content.charts:
        _chart(pdf, content, "scatter", CHART_TITLES["scatter"])
        _chart(pdf, content, "bland_altman")
        lim = content.limits
        _paragraph(
            pdf,
            f"Bias {number(lim['bias'], 2)}, 95% limits of agreement {number(lim['loa_low'], 2)} to "
            f"{number(lim['loa_high'], 2)} (n = {lim['n_items']} items).",
        )
        _heading(pdf, "Largest disagreements", 11, keep=20)
        _table(
            pdf,
            disagreements_display(content.disagreements),
            6,
            (12, 20, 18, 30, 16, 14, 12, 16, 44) if "output_excerpt" in content.disagreements else None,
        )
    if "judges" in content.charts:
        _chart(pdf, content, "judges", CHART_TITLES["judges"])
    for section in alignment_sections(content):
        if section.chart:
            _chart(pdf, content, section.chart, section.heading)
        else:
            _heading(pdf, section.heading, 11, keep=20)
        if section.text:
            _paragraph(pdf, section.text)
        if section.table is not None:
            _table(pdf, section.table, 6)
    if "clinicians" in content.charts:
        _chart(pdf, content, "clinicians", CHART_TITLES["clinicians"])
        _table(pdf, leniency_display(content.leniency, content.data.speed), 6)
    if "distribution" in content.charts:
        _chart(pdf, content, "distribution", CHART_TITLES["distribution"])
    _heading(pdf, "Every figure", keep=20)
    _table(pdf, agreement_display(content.agreement), 5.5, (24, 14, 14, 14, 34, 10, 16, 14, 10, 10, 22))
    _heading(pdf, "Versions", keep=30)
    _table(
        pdf, pd.DataFrame({"package": list(content.versions), "version": list(content.versions.values())}), 7, (60, 60)
    )
    return bytes(pdf.output())
