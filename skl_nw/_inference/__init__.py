"""Inference on the smoothers: standard errors, intervals, criteria, the significance test.

``_formulas.py`` holds the shared formulas (local variances, criteria, the
hat diagonal's uses), ``_methods.py`` and ``_local.py`` the estimators' inference
methods, ``_bootstrap.py`` the wild bootstrap-t, ``_bands.py`` robust bias
correction and the warnings, ``_diagnostics.py`` the fitted summary and
``_significance.py`` the test.
"""
