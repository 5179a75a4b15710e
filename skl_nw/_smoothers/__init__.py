"""The smoothers: the estimators as thin layers over the engine.

``_base.py`` holds what they share (validation, rules of thumb, the one place
that chooses the algorithm), ``_backends.py`` the fitted training side (one
object, exact or binned), and one module per estimator; ``_loess.py`` adds the
span and the robustness iterations to all of them.
"""
