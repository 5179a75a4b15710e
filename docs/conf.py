"""Sphinx configuration of the skl_nw documentation (``make -C docs html``)."""

import re
import sys
from pathlib import Path

from docutils import nodes
from sphinx.errors import ConfigError, SphinxError
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
    # MathJax 3 served from _static/mathjax (copied from the package), never from a CDN.
    "sphinx-mathjax-offline",
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
    # No "computation times" pages: their sortable tables load jQuery and DataTables from a CDN.
    "write_computation_times": False,
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
html_css_files = ["skl_nw.css"]
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
}
# No section navigation on the example pages: their code (ruff's 99 columns) then fits the
# text column of a 1280 px window without wrapping; the gallery index lists the examples.
html_sidebars = {
    "index": [],
    "getting_started": [],
    "benchmarks": [],
    "auto_examples/plot_*": [],
}
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
    """Leave out the members a class inherits from scikit-learn, and those it hides.

    Their docstrings point into scikit-learn's own documentation (its glossary, its
    metadata-routing guide), which this build cannot resolve; the class template names them.
    """
    if what == "class" and (getattr(obj, "__module__", None) or "").startswith("sklearn."):
        return True
    if getattr(obj, "unavailable", False):  # a method the class hides from its instances
        return True
    return None


def _trim_doctest_blocks(app, doctree):
    """Drop the blank line that ends each doctest block of a Markdown page.

    pytest runs the ``pycon`` blocks of docs/*.md as doctests; the blank line before the
    closing fence ends the expected output there, and has nothing to show on the page.
    """
    for node in doctree.findall(nodes.literal_block):
        text = node.astext()
        if node.get("language") == "pycon" and text != text.rstrip():
            node.rawsource = text.rstrip()
            node.children = [nodes.Text(node.rawsource)]


# Matplotlib objects that a plotting cell leaves as its last expression (a legend, a
# colorbar, the list of Text objects of ``ax.set``) and sphinx-gallery prints as output.
_STRAY_REPR = re.compile(r"<[\w.]+ object at 0x[0-9a-f]+>|\bText\(-?\d")
_REMOTE = re.compile(r"<(?:script|link)\b[^>]*\b(?:src|href)=\"(?:https?:)?//[^\"]*\"")


class DocsCheckError(SphinxError):
    category = "skl_nw docs check"


def _check_gallery_outputs(app, exception):
    """Fail the build if a gallery page prints the repr of a matplotlib object."""
    if exception is not None:
        return
    found = [
        f"{path.name}: {match.group(0)}"
        for path in sorted((DOCS / "auto_examples").glob("plot_*.rst"))
        for match in _STRAY_REPR.finditer(path.read_text(encoding="utf-8"))
    ]
    if found:
        raise DocsCheckError(
            "gallery cells end with a matplotlib object, whose repr is printed; end them with "
            "plt.show() or an assignment: " + "; ".join(found)
        )


def _check_offline_html(app, exception):
    """Fail the build if a page loads a script or stylesheet from the network.

    Also checks that MathJax itself was copied next to the pages, so formulas render
    without a network connection.
    """
    if exception is not None or app.builder.format != "html":
        return
    outdir = Path(app.outdir)
    remote = [
        f"{path.relative_to(outdir)}: {match.group(0)}"
        for path in sorted(outdir.rglob("*.html"))
        for match in _REMOTE.finditer(path.read_text(encoding="utf-8"))
    ]
    if remote:
        raise DocsCheckError("pages load files from the network: " + "; ".join(remote[:5]))
    if not (outdir / "_static" / app.config.mathjax_path).is_file():
        raise DocsCheckError(f"MathJax is missing from _static/{app.config.mathjax_path}")


def setup(app):
    app.connect("autodoc-skip-member", _skip_sklearn_members)
    app.connect("builder-inited", _check_api_page)
    app.connect("doctree-read", _trim_doctest_blocks)
    app.connect("build-finished", _check_gallery_outputs)
    # After sphinx-mathjax-offline has copied MathJax (it connects first, at the same priority).
    app.connect("build-finished", _check_offline_html, priority=900)
    app.connect("autodoc-process-docstring", _data_docstrings)
