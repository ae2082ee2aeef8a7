"""``tnp.vectorize``: ``np.vectorize`` that differentiates.

NumPy's ``np.vectorize`` converts its inputs to plain arrays and calls the
function on Python scalars, so a traced input cannot pass through it (and
NumPy does not hand the call to tapestry).  This version takes the same
arguments and gives the same results, with the element loop written as
:func:`tapestry.vmap` over the broadcast inputs: ``f`` sees each element
(or, with ``signature``, each core slice) as a traced value, so gradients,
forward mode and jit go through.  With plain inputs it is NumPy's own
``np.vectorize``.

A function that branches on its element (``if t > 0``), which vmap
refuses, runs element by element instead (NumPy's loop, with each element
traced).  As in NumPy, the output dtype is the first element's (or ``otypes``),
``f`` is called once more on the first element to find it (unless
``otypes`` is given), ``excluded`` arguments pass unchanged, and an empty
input needs ``otypes``.
"""
from __future__ import annotations

import re
import warnings

import numpy as np

_DIMS = r"\((?:\w+(?:,\s*\w+)*)?\)"
_SIGNATURE = re.compile(rf"^\s*{_DIMS}(?:\s*,\s*{_DIMS})*\s*->\s*{_DIMS}(?:\s*,\s*{_DIMS})*\s*$")


def _parse(signature):
    """``([core dims of each input], [core dims of each output])``, each a
    tuple of dimension names (NumPy's gufunc signature syntax)."""
    if not _SIGNATURE.match(signature):
        raise ValueError(f"not a valid gufunc signature: {signature}")
    ins, outs = signature.split("->")
    parse = lambda side: [tuple(d.strip() for d in g.split(",") if d.strip())  # noqa: E731
                          for g in re.findall(r"\(([^)]*)\)", side)]
    return parse(ins), parse(outs)


def _traced(values):
    """Whether a value (or an item of a list or tuple) is traced by grad,
    vmap or jit."""
    from ..core.batched import TRACED
    return any(isinstance(v, TRACED) or
               (v.__class__ in (list, tuple) and _traced(v)) for v in values)


class vectorize:
    """``np.vectorize(pyfunc, otypes, doc, excluded, cache, signature)``
    whose loop is :func:`tapestry.vmap`: differentiable in its inputs."""

    def __init__(self, pyfunc=np._NoValue, otypes=None, doc=None, excluded=None, cache=False,
                 signature=None):
        if pyfunc is np._NoValue:  # @tnp.vectorize(otypes=...) as a decorator
            self._args = (otypes, doc, excluded, cache, signature)
            self.pyfunc = None
            return
        self._numpy = np.vectorize(pyfunc, otypes=otypes, doc=doc, excluded=excluded,
                                   cache=cache, signature=signature)
        self.pyfunc, self.otypes, self.signature = pyfunc, otypes, signature
        self.excluded = set(excluded or ())
        self.__doc__ = self._numpy.__doc__
        self._core = _parse(signature) if signature is not None else None

    def __call__(self, *args, **kwargs):
        if self.pyfunc is None:
            return vectorize(args[0], *self._args)
        if not _traced(list(args) + list(kwargs.values())):
            try:
                return self._numpy(*args, **kwargs)
            except TypeError as e:  # f read a traced value from a closure: its results are traced
                if not getattr(e, "vectorize_refusal", False):
                    raise
        return self._mapped(args, kwargs)

    # --- the loop as vmap ------------------------------------------------------------
    def _mapped(self, args, kwargs):
        from ..core.api_vmap import vmap
        from ..core.batched import VmapFallbackWarning
        from ..core.var import BatchedConversionError
        pos = [i for i in range(len(args)) if i not in self.excluded]
        names = [k for k in kwargs if k not in self.excluded]
        mapped = [args[i] for i in pos] + [kwargs[k] for k in names]
        cores = self._core[0] if self._core else [()] * len(mapped)
        if len(cores) != len(mapped):
            raise TypeError(f"wrong number of positional arguments: expected {len(cores)}, "
                            f"got {len(mapped)}")
        loop, sizes = self._loop_shape(mapped, cores)
        flat = [np.reshape(np.broadcast_to(v, loop + np.shape(v)[np.ndim(v) - len(c):]),
                           (-1,) + tuple(np.shape(v)[np.ndim(v) - len(c):]))
                for v, c in zip(mapped, cores)]

        def one(*vals):
            a, k = list(args), dict(kwargs)
            for i, v in zip(pos, vals):
                a[i] = v
            for name, v in zip(names, vals[len(pos):]):
                k[name] = v
            return self.pyfunc(*a, **k)

        n = int(np.prod(loop, dtype=np.int64))
        otypes = self._otypes(one, flat, n)
        if n == 0:
            return self._empty(loop, otypes, sizes)
        try:
            with warnings.catch_warnings():
                # f converting its element runs element by element: what the user asked for
                warnings.simplefilter("ignore", VmapFallbackWarning)
                out = vmap(one)(*flat)
        except BatchedConversionError:
            # f branches on its element (``if t > 0``): NumPy's loop, element by element
            outs = [one(*[v[i] for v in flat]) for i in range(n)]
            out = tuple(np.stack(o) for o in zip(*outs)) if isinstance(outs[0], tuple) \
                else np.stack(outs)
        single = not isinstance(out, tuple)
        outs = (out,) if single else out
        if self._core and len(self._core[1]) != len(outs):
            raise ValueError(f"wrong number of outputs from pyfunc: expected "
                             f"{len(self._core[1])}, got {len(outs)}")
        res = []
        for k, o in enumerate(outs):
            o = np.reshape(o, loop + np.shape(o)[1:])
            want = np.dtype(otypes[k])
            if _dtype(o) != want:
                o = o.astype(want)
            res.append(o)
        return res[0] if single else tuple(res)

    def _loop_shape(self, mapped, cores):
        """The broadcast shape of the inputs' loop dimensions, and the size
        of every core dimension name (checked equal where it repeats)."""
        sizes: dict = {}
        loops = []
        for v, c in zip(mapped, cores):
            shape = np.shape(v)
            if len(shape) < len(c):
                raise ValueError(f"input with shape {shape} does not have enough dimensions "
                                 f"for its core dimensions {c}")
            for name, d in zip(c, shape[len(shape) - len(c):]):
                if sizes.setdefault(name, d) != d:
                    raise ValueError(f"inconsistent size for core dimension {name!r}: "
                                     f"{d} vs {sizes[name]}")
            loops.append(shape[:len(shape) - len(c)])
        return tuple(np.broadcast_shapes(*loops)), sizes

    def _otypes(self, one, flat, n):
        """The output dtypes: ``otypes``, else those of ``f`` on the first
        element (NumPy calls ``f`` on it once more to find them)."""
        if self.otypes is not None:
            ot = self.otypes
            return list(ot) if isinstance(ot, str) else [np.dtype(t) for t in ot]
        if n == 0:
            raise ValueError("cannot call `vectorize` on size 0 inputs unless `otypes` is set")
        first = one(*[v[0] for v in flat])
        outs = first if isinstance(first, tuple) else (first,)
        return [_dtype(o) for o in outs]

    def _empty(self, loop, otypes, sizes):
        if self._core is None:
            outs = [np.empty(loop, t) for t in otypes]
            return outs[0] if len(outs) == 1 else tuple(outs)
        outs = []
        for c, t in zip(self._core[1], otypes):
            if any(d not in sizes for d in c):
                raise ValueError("cannot call `vectorize` with a signature including new "
                                 "output dimensions on size 0 inputs")
            outs.append(np.empty(loop + tuple(sizes[d] for d in c), t))
        return outs[0] if len(outs) == 1 else tuple(outs)


def _dtype(v):
    """The dtype NumPy's ``np.vectorize`` would give ``v`` (``np.asarray(v).dtype``)."""
    dt = getattr(v, "dtype", None)
    return np.dtype(dt) if dt is not None else np.asarray(v).dtype
