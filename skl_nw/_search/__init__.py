"""BandwidthSearchCV: the search of the kernel estimators' bandwidths."""

from ._cv import BandwidthSearchCV

__all__ = ["BandwidthSearchCV"]
