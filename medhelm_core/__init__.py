"""MedHELM Calibrate: the library behind the app and the ``medhelm`` CLI.

Everything here is testable without Streamlit: storage, importers, assignment, the jury, metrics,
agreement and reports. The Streamlit pages call this package; it never imports streamlit.
"""

__version__ = "0.1.0"
