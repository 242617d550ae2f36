"""The operations dashboard: a Streamlit app (``app.py``) whose pages (``views/``) draw what lib.dashboard computes."""

from pathlib import Path

APP = Path(__file__).resolve().parent / "app.py"
PAGES = Path(__file__).resolve().parent / "views"
