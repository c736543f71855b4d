"""Sphinx configuration of the torch_wge documentation: MyST Markdown pages, the API
reference from the Google-style docstrings (autodoc + napoleon) and the command line
reference from the argparse parser (sphinx-argparse). Builds offline: no intersphinx."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout's torch_wge, installed or not

import torch_wge  # noqa: E402

project = "torch_wge"
author = "torch_wge contributors"
copyright = "2026, torch_wge contributors"
release = version = torch_wge.__version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "sphinxarg.ext",
]

source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]

myst_enable_extensions = ["dollarmath"]
myst_heading_anchors = 3

autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autosummary_generate = False
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_custom_sections = [("Shapes", "params_style")]

html_theme = "furo"
html_title = f"torch_wge {version}"
