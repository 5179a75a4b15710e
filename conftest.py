"""Root conftest: runs before scipy is first imported by any test or doctest."""

import os

# scikit-learn's array-API check (run for every estimator with NumPy inputs)
# skips itself unless scipy's array-API mode is on; turn it on so that no
# check of parametrize_with_checks is skipped.
os.environ.setdefault("SCIPY_ARRAY_API", "1")
