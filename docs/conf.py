"""Sphinx configuration of the skl_nw documentation (``make -C docs html``)."""

import re
import sys
from pathlib import Path

from sphinx.errors import ConfigError
from sphinx.pycode import ModuleAnalyzer

import skl_nw

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS / "sphinxext"))

# -- Project ------------------------------------------------------------------
project = "skl_nw"
author = "skl_nw developers"
copyright = "skl_nw developers"  # noqa: A001
release = skl_nw.__version__
version = release

# -- General ------------------------------------------------------------------
extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
    "myst_parser",
    "matplotlib.sphinxext.plot_directive",
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
templates_path = ["_templates"]
exclude_patterns = ["_build", "auto_examples/*.ipynb", "auto_examples/*.py"]

# -- MyST (the user guide is written in Markdown) ------------------------------
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist"]
myst_heading_anchors = 3
myst_dmath_double_inline = True

# -- autodoc / autosummary / numpydoc ------------------------------------------
autosummary_generate = True
autodoc_typehints = "none"  # numpydoc's Parameters sections carry the types
numpydoc_show_class_members = False  # the autosummary class template lists members
numpydoc_class_members_toctree = False
numpydoc_attributes_as_param_list = True

# -- Gallery --------------------------------------------------------------------
sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": "/plot_",
    "within_subsection_order": "gallery_order.StoryOrder",
    "doc_module": ("skl_nw",),
    "backreferences_dir": "gen_modules/backreferences",
    "abort_on_example_error": True,
    "show_memory": False,
    "remove_config_comments": True,
    "min_reported_time": 1,
    # Objects with no example have no mini-gallery: not a problem worth a warning.
    "log_level": {"backreference_missing": "debug"},
}

# -- Plot directive (figures drawn at build time in the user guide) ------------
plot_include_source = False
plot_html_show_source_link = False
plot_html_show_formats = False
plot_formats = [("png", 110)]
plot_rcparams = {"figure.autolayout": True}

# -- HTML -----------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"skl_nw {release}"
html_static_path = ["_static"]
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
}
html_sidebars = {"index": [], "getting_started": [], "benchmarks": []}
html_show_sourcelink = False


# -- Checks and docstrings for module-level data --------------------------------
def _check_api_page(app):
    """Fail the build if a public name of ``skl_nw.__all__`` is missing from api.rst."""
    text = (DOCS / "api.rst").read_text(encoding="utf-8")
    listed = set(re.findall(r"^\s{3}(\w+)\s*$", text, flags=re.MULTILINE))
    missing = sorted(set(skl_nw.__all__) - listed)
    if missing:
        raise ConfigError(f"api.rst lacks these public names of skl_nw.__all__: {missing}")


_DATA_DOCS = {
    # Where the package documents its data with a ``#:`` comment, use that comment.
    "skl_nw.KERNELS": ("skl_nw._kernels", "KERNELS"),
}


def _data_docstrings(app, what, name, obj, options, lines):
    """Docstrings for module-level data re-exported by ``skl_nw/__init__.py``."""
    # autodoc would otherwise show the docstring of the value's type (dict, str).
    if name in _DATA_DOCS:
        lines.clear()
        module, attribute = _DATA_DOCS[name]
        comment = ModuleAnalyzer.for_module(module).find_attr_docs().get(("", attribute), [])
        lines.extend(comment)
        if name == "skl_nw.KERNELS":
            names = ", ".join(f'``"{key}"``' for key in obj)
            lines.extend(["", f"Keys: {names}. Each value is a :class:`Kernel` record."])
    elif name == "skl_nw.__version__":
        lines.clear()
        lines.extend([f"The version of skl_nw, a :pep:`440` string (``{obj!r}`` here)."])


def _skip_sklearn_members(app, what, name, obj, skip, options):
    """Leave out the members a class inherits from scikit-learn.

    Their docstrings point into scikit-learn's own documentation (its glossary, its
    metadata-routing guide), which this build cannot resolve; the class template names them.
    """
    if what == "class" and (getattr(obj, "__module__", None) or "").startswith("sklearn."):
        return True
    return None


def setup(app):
    app.connect("autodoc-skip-member", _skip_sklearn_members)
    app.connect("builder-inited", _check_api_page)
    app.connect("autodoc-process-docstring", _data_docstrings)
