import numpy as np, warnings
warnings.simplefilter('ignore')
from skl_nw import *
rng = np.random.default_rng(0)
n = 80
for trial in range(3):
    X = rng.uniform(size=(n, 2)); y = np.sin(4*X[:,0]) + 0.3*rng.normal(size=n); Xq = rng.uniform(size=(200, 2))
    w = rng.integers(0, 4, n).astype(float); idx = np.repeat(np.arange(n), w.astype(int))
    a = NadarayaWatsonRegressor(bandwidth=0.15, kernel='epanechnikov').fit(X, y, sample_weight=w)
    b = NadarayaWatsonRegressor(bandwidth=0.15, kernel='epanechnikov').fit(X[idx], y[idx])
    sa = a.predict(Xq, return_std=True)[1]; sb = b.predict(Xq, return_std=True)[1]
    rel = np.abs(sa - sb) / np.maximum(sb, 1e-300)
    i = np.argmax(np.where(sb > 0, rel, 0))
    print(trial, 'max rel', rel[sb > 0].max(), sa[i], sb[i], 'zero in one only:', np.sum((sa == 0) != (sb == 0)), 'max abs', np.abs(sa-sb).max())
