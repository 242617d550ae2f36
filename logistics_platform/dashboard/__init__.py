"""The operations dashboard: a Streamlit app (``app.py``) whose pages (``views/``) draw what lib.dashboard computes."""

from pathlib import Path

APP = Path(__file__).resolve().parent / "app.py"
PAGES = Path(__file__).resolve().parent / "views"

# Options of every way the app is run (the `dashboard` command, AppTest). Magic off: the pages call Streamlit for
# everything they show, and with it on Streamlit parses each page with `ast.parse`, which on CPython 3.11 before 3.11.9
# fails at random when another thread parses at the same time (cpython#106905, "AST constructor recursion depth
# mismatch"); off, a page compiles from its source.
RUNNER_OPTIONS = {"runner.magicEnabled": False}
