"""What a user installs: metadata, version, typing marker, every module importable.

CI runs these against the installed wheel (outside the source tree) as well as
against the working copy; .ci/check_dist.py compares the wheel's files with git's.
"""

import importlib
import importlib.metadata
import importlib.resources
import pkgutil
import re
import subprocess
import sys

import skl_nw

DIST = "skl-nw"


def test_version_is_single_sourced_and_shown_by_the_command_line(tmp_path):
    assert importlib.metadata.version(DIST) == skl_nw.__version__
    done = subprocess.run(
        [sys.executable, "-m", "skl_nw", "--version"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    assert done.stdout.strip() == f"skl_nw {importlib.metadata.version(DIST)}"


def test_typing_marker_is_installed():
    assert importlib.resources.files("skl_nw").joinpath("py.typed").is_file()


def test_every_module_of_the_package_imports():
    names = [info.name for info in pkgutil.walk_packages(skl_nw.__path__, "skl_nw.")]
    assert "skl_nw._engine" in names and "skl_nw._engine._sums" in names
    for name in names:
        if name != "skl_nw.__main__":
            importlib.import_module(name)


def test_metadata_an_index_accepts():
    meta = importlib.metadata.metadata(DIST)
    assert meta["License-Expression"] == "BSD-3-Clause"
    # An index refuses license classifiers beside a license expression.
    classifiers = meta.get_all("Classifier")
    assert not [c for c in classifiers if c.startswith("License ::")]
    assert "Operating System :: OS Independent" in classifiers
    lowest = re.fullmatch(r">=3\.(\d+)", meta["Requires-Python"])
    assert lowest is not None
    versions = sorted(int(c.rsplit(".", 1)[1]) for c in classifiers
                      if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c))  # fmt: skip
    assert versions and versions[0] == int(lowest.group(1))
    for url in meta.get_all("Project-URL") or []:
        assert "example" not in url and "invalid" not in url, url
