"""np.median over empty slices: NumPy's nan, under grad too."""
import warnings

import numpy as np
import pytest

import tapestry as tp


@pytest.mark.parametrize("shape,axis", [((0,), None), ((0, 3), 0), ((0, 3), None), ((2, 0), 1)])
def test_median_over_no_values_is_numpys_nan(shape, axis):
    """NumPy's median of an empty slice is the mean of it (nan, "Mean of
    empty slice"); under grad it raised IndexError.  Its gradient is the
    empty array, and the backward pass warns of nothing."""
    x = np.ones(shape)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        want = np.median(x, axis=axis)
    with warnings.catch_warnings(record=True) as w2:
        warnings.simplefilter("always")
        got, pullback = tp.vjp(lambda x: np.median(x, axis=axis), x)
    np.testing.assert_array_equal(got, want)
    assert [str(m.message) for m in w2] == [str(m.message) for m in w]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert pullback(np.ones_like(got))[0].shape == shape
