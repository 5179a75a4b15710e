"""Root conftest: runs before scipy is first imported by any test or doctest."""

import os

import pytest

# scikit-learn's array-API check (run for every estimator with NumPy inputs)
# skips itself unless scipy's array-API mode is on; turn it on so that no
# check of parametrize_with_checks is skipped.
os.environ.setdefault("SCIPY_ARRAY_API", "1")


@pytest.fixture(autouse=True)
def _docs_pages_run_in_tmp_path(request, monkeypatch):
    """Run the doctests of the documentation pages (docs/*.md) in a temporary folder.

    A page that saves a model (persistence.md) then writes it there, not into the checkout.
    """
    if request.node.path.suffix == ".md":
        monkeypatch.chdir(request.getfixturevalue("tmp_path"))


def pytest_report_header(config):
    """Say which skl_nw the tests run against (the working copy or an installed wheel)."""
    import skl_nw

    return f"skl_nw {skl_nw.__version__} from {os.path.dirname(skl_nw.__file__)}"
