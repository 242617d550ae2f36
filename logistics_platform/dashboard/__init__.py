"""The operations dashboard: a Streamlit app (``app.py``) whose pages (``views/``) draw what lib.dashboard computes.

Served by `logistics-platform dashboard` (`make dashboard`) on 127.0.0.1:DASHBOARD_PORT.
"""

from __future__ import annotations

from pathlib import Path

APP = Path(__file__).resolve().parent / "app.py"
# Not `pages/`: Streamlit would serve a folder of that name beside the app as pages of their own, around app.py.
PAGES = Path(__file__).resolve().parent / "views"
