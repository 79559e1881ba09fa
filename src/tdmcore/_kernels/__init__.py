"""Compiled kernels: plain arrays and scalars in, arrays or scalars out.

Nothing here validates its input: the public wrappers in :mod:`tdmcore` do that and
hand contiguous float64 / int64 arrays to these functions.
"""
