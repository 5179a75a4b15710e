"""Gallery order: the examples as a story (examples/README.txt tells it)."""

ORDER = [
    "plot_attention_pooling.py",
    "plot_attention_heatmap.py",
    "plot_kernels.py",
    "plot_bandwidth_selection.py",
    "plot_regression_surface.py",
    "plot_local_polynomial.py",
    "plot_parzen_classifier.py",
    "plot_consistency.py",
    "plot_unit_sphere.py",
    "plot_diabetes_pipeline.py",
    "plot_mixed_data.py",
    "plot_relevance_determination.py",
    "plot_confidence_bands.py",
    "plot_significance_test.py",
    "plot_conditional_quantiles.py",
    "plot_conformal_quantiles.py",
    "plot_binned_smoothing.py",
]


class StoryOrder:
    """Sort key for ``within_subsection_order``: listed files first, in order, then the rest."""

    def __init__(self, src_dir):
        self.src_dir = src_dir

    def __call__(self, filename):
        position = ORDER.index(filename) if filename in ORDER else len(ORDER)
        return position, filename

    def __repr__(self):
        # sphinx-gallery caches its configuration: a stable repr keeps the cache valid.
        return "StoryOrder"
