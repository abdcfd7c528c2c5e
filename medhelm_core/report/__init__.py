"""The calibration report: one HTML file that opens offline, a PDF of the same content, and a data bundle.

- :mod:`~medhelm_core.report.content`: :class:`ReportOptions` and :func:`report_content` (every table and
  chart, computed once with :mod:`medhelm_core.figures`, so the report matches the Agreement page).
- :mod:`~medhelm_core.report.method`: the method in plain words.
- :mod:`~medhelm_core.report.html`, :mod:`~medhelm_core.report.pdf`: the two renderings.
- :mod:`~medhelm_core.report.bundle`: CSV files and ``manifest.json`` to recompute the figures elsewhere.
- :mod:`~medhelm_core.report.build`: :func:`write_report`, used by ``medhelm report`` and the page.
"""

from medhelm_core.report.build import HTML_NAME, PDF_NAME, ReportFiles, write_report, zip_folder
from medhelm_core.report.bundle import BUNDLE_DIR, MANIFEST, read_scores_long, write_bundle
from medhelm_core.report.content import ReportContent, ReportOptions, package_versions, report_content
from medhelm_core.report.html import render_html, vega_bundle
from medhelm_core.report.method import method_paragraphs, recompute_snippet
from medhelm_core.report.pdf import render_pdf

__all__ = [
    "BUNDLE_DIR",
    "HTML_NAME",
    "MANIFEST",
    "PDF_NAME",
    "ReportContent",
    "ReportFiles",
    "ReportOptions",
    "method_paragraphs",
    "package_versions",
    "read_scores_long",
    "recompute_snippet",
    "render_html",
    "render_pdf",
    "report_content",
    "vega_bundle",
    "write_bundle",
    "write_report",
    "zip_folder",
]
