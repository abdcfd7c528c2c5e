"""The Streamlit pages. Each is a short script: read state, call medhelm_core, draw."""
