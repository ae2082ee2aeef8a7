"""Whole small programs compiled into one numba function.

A replay of a small program (one item of W7: twenty observations) makes
a NumPy call per step, ~0.5 us each, and holds the GIL throughout: threads
replaying at once take turns.  When *every* step of a program is in the set
below, :func:`compile_whole` lowers the whole program into one function
compiled with numba (``nogil=True``; the source goes to a file under the
cache directory, so ``cache=True`` keeps the machine code across
processes), called by a thin Python wrapper.  Anything outside the set
keeps the program as it is: this pass only ever declines.

The set: float64 elementwise arithmetic and the functions fused loops
compute (:mod:`tapestry.jit.fuse`'s tables, the same expressions),
comparisons, ``sum`` (whole, or along one axis of a 2-d array: NumPy's
order, :mod:`tapestry.jit.whole_kernels`), ``min`` / ``max`` (whole),
``reshape`` / ``ravel``, ``asarray``, ``zeros`` / ``zeros_like``,
``x[i]`` / ``x[a:b:c]`` / ``x[idx]`` (an int array) on a 1-d array,
``x[:, None]`` (new axes on a contiguous array) and its gradient, the
einsum row sums of :func:`tapestry.core.batching.trailing_sum` (einsum's
own order), ``np.add.at`` into a 1-d array, and the guards on shapes, truth values,
ints and floats; values of dtype float64, int64 or bool.

What the wrapper does (the same model as fused loops): the kernel checks
its arguments' types (one compiled signature: a C-contiguous writable
array of each input's shape and dtype; anything else runs the program), and
flags every inf or nan it makes, every index out of bounds (a negative one
counts from the end, as NumPy's), every guard that fails, and a
``maximum`` / ``minimum`` (or a ``max`` / ``min`` of zero) meeting ``0.0`` and
``-0.0`` (NumPy's SIMD code picks one its own way).  A flag runs
the Python program on the same inputs: NumPy's warnings, errors, nan bits
and ``GuardFailed`` are then the program's own.  Outputs get the trace's
types back (``np.float64``, a Python float, a 0-d array), are laid out as
NumPy lays them out (a program with an output NumPy makes in another order
than C -- from a transposed operand, order "K" -- is declined), and never share
memory with an input or another output (such programs are declined).
Results agree with the Python program within a few ulp (the fused loops'
``exp``, ``tanh`` and libm functions); sums have NumPy's own order, so
their bits match given the same addends.
"""
from __future__ import annotations

import functools
import math
import operator
import os
import re

import numpy as np

from ..core.staged import Slot, _method
from ..kernels.compile_numba import cache_dir, load_source
from .fuse import _ARITH, _TRANSCENDENTAL, _VECTORIZED, _index
from .fuse import _sum_function as _sum_fun
from .program import Program, _fresh_constants, _live_steps, private_copy, simplify
from .slots import reads_of


class Unsupported(Exception):
    """A step (or a value) outside what a whole-program kernel computes."""


#: Comparisons (the result is a bool, NumPy's and Python's alike).
_COMPARE = {
    operator.lt: "<", np.less: "<", operator.le: "<=", np.less_equal: "<=",
    operator.gt: ">", np.greater: ">", operator.ge: ">=", np.greater_equal: ">=",
    operator.eq: "==", np.equal: "==", operator.ne: "!=", np.not_equal: "!=",
}
#: Elementwise functions beyond fused loops' tables: ``{0}``, ``{1}``, ``{2}``
#: operands.  ``maximum`` / ``minimum`` make a nan of a nan (then flagged);
#: between equal values they take the first, which is NumPy's value but for
#: ``0.0`` against ``-0.0``, whose pick NumPy leaves to its SIMD code (the
#: second operand on x86): that pair is flagged (:data:`_SIGNED_ZEROS`).
_MORE_FLOAT = {
    np.maximum: "({0} if {0} >= {1} else ({1} if {1} >= {0} else {0} + {1}))",
    np.minimum: "({0} if {0} <= {1} else ({1} if {1} <= {0} else {0} + {1}))",
    np.where: "({1} if {0} else {2})",
}
#: The test of a float ``maximum`` / ``minimum`` of ``{0}`` and ``{1}`` that
#: meet as ``0.0`` and ``-0.0``: NumPy's result there is its SIMD code's
#: choice, so the kernel does not guess it (``maximum(x, 0.0)`` of a ``-0.0``).
_SIGNED_ZEROS = ("(({0}) == 0.0 and ({1}) == 0.0 and "
                 "math.copysign(1.0, ({0}) * 1.0) != math.copysign(1.0, ({1}) * 1.0))")
#: Integer results (arrays only: NumPy wraps an int64 array's overflow
#: silently, as the kernel does, where a scalar's warns).
_INT = {np.add: "({0} + {1})", operator.add: "({0} + {1})", np.subtract: "({0} - {1})",
        operator.sub: "({0} - {1})", np.multiply: "({0} * {1})", operator.mul: "({0} * {1})",
        np.negative: "(-{0})", operator.neg: "(-{0})", **{k: v for k, v in _MORE_FLOAT.items()}}
#: Bool results (besides comparisons).
_BOOL = {np.isnan: "({0} != {0})", np.isfinite: "(({0} - {0}) == 0.0)",
         operator.and_: "({0} & {1})", np.logical_and: "({0} & {1})",
         np.bitwise_and: "({0} & {1})", operator.or_: "({0} | {1})",
         np.logical_or: "({0} | {1})", np.bitwise_or: "({0} | {1})",
         np.logical_not: "(not {0})", np.where: "({1} if {0} else {2})"}
#: Functions whose arguments are all bools (else the result is not a bool op).
_BOOL_ONLY = {operator.and_, np.logical_and, np.bitwise_and, operator.or_, np.logical_or,
              np.bitwise_or, np.logical_not}
_MATMULS = {operator.matmul, np.matmul, np.dot}
_TRANSPOSES = {np.transpose, _method("transpose"), np.swapaxes, _method("swapaxes")}
_RESHAPE_LIKE = {np.expand_dims, np.squeeze, _method("squeeze")}
_COPIES = {np.copy, _method("copy")}
_ADD_REDUCE = np.add.reduce  # (bound methods compare equal, not identical)
_SUMS = {np.sum, _method("sum"), _ADD_REDUCE}
_MINS = {np.min, np.amin, _method("min")}
_MAXS = {np.max, np.amax, _method("max")}
_RESHAPES = {np.reshape, _method("reshape")}
_RAVELS = {np.ravel, _method("ravel")}
_GETITEMS = {operator.getitem, _method("__getitem__")}
_DTYPES = {np.dtype(np.float64): "f", np.dtype(np.int64): "i", np.dtype(np.bool_): "b"}
_NUMBA_DTYPE = {"f": "np.float64", "i": "np.int64", "b": "np.bool_"}
_SIG_DTYPE = {"f": "float64", "i": "int64", "b": "boolean"}
#: scalar types a slot may hold -> (dtype letter, how the wrapper rebuilds it)
_SCALARS = {float: ("f", float), np.float64: ("f", np.float64), int: ("I", int),
            np.int64: ("i", np.int64), bool: ("b", bool), np.bool_: ("b", np.bool_)}
#: ``TAPESTRY_JIT_WHOLE=0`` turns whole-program kernels off (fused loops stay).
ENABLED = os.environ.get("TAPESTRY_JIT_WHOLE", "") != "0"
#: Longest program (live steps) worth compiling whole: numba's compile time
#: grows with it, and a long program's NumPy calls are not its cost.
MAX_STEPS = 400


@functools.lru_cache(maxsize=None)
def _dense_scatter():
    from ..ops.indexing import dense_scatter
    return dense_scatter


@functools.lru_cache(maxsize=None)
def _extrema():
    """tapestry's max / min primitives' functions ``(a, axis, keepdims)``,
    the functions a trace records (inside the primitives' forwards)."""
    from ..ops.reductions import _max, _min
    return {_recorded(_max.fun): "max", _recorded(_min.fun): "min"}


def _recorded(forward):
    """The function a primitive's forward records (its closure's ``fun``,
    :func:`tapestry.core.primitive._reentering`), else ``forward``."""
    names = getattr(getattr(forward, "__code__", None), "co_freevars", ())
    if "fun" in names:
        return forward.__closure__[names.index("fun")].cell_contents
    return forward


class _Val:
    """What the kernel knows of a slot: dtype letter (``f``, ``i``, ``b``;
    ``I`` a Python int), shape (``()``: a numba scalar), whether the slot is
    an ndarray (else a scalar type, ``scalar_type``), whether its memory is
    C-contiguous, and the slot whose memory it is (``root``)."""

    __slots__ = ("dt", "shape", "array", "scalar_type", "contig", "root")

    def __init__(self, dt, shape, array, scalar_type, contig, root):
        self.dt, self.shape, self.array, self.scalar_type = dt, shape, array, scalar_type
        self.contig, self.root = contig, root


def compile_whole(lowering, fallback):
    """A :class:`Program` running the whole program of ``lowering`` (what
    :func:`tapestry.jit.program.lower` was given) as one numba function, with
    ``fallback`` (the Python program) for everything the kernel flags; or a
    sentence saying why the program is not compiled whole."""
    if not ENABLED:
        return "turned off (TAPESTRY_JIT_WHOLE=0)"
    rec, inputs, outputs, _env_arrays, name = lowering  # (constants: copied)
    steps, outputs = simplify(rec.steps, outputs, rec.meta)
    live = _live_steps(steps, outputs)
    if sum(live) > MAX_STEPS:
        return f"longer than {MAX_STEPS} steps"
    try:
        gen = _Kernel(steps, live, inputs, outputs, rec.meta, rec.scalars)
        src, sig = gen.build()
    except Unsupported as e:
        return str(e)
    mod = load_source(src, "tw", "tapestry_whole", cache_dir("jit"))
    kern = mod.kern
    wrapper, wsrc = _wrapper(kern, sig, gen, fallback.run, name)
    source = (fallback.source + f"\n# compiled whole (numba), {fallback.__class__.__name__} "
              f"above on a flag:\n{wsrc}\n{src}")
    prog = Program(source, wrapper, fallback.steps, 1, fallback.n_guards, fallback.consts,
                   fallback.n_runs)
    prog.whole = True
    prog.kernel = Kernel(kern, mod.__name__, sig, len(gen.inputs),
                         [c for _, c in gen.consts], _output_kinds(gen), _into(gen),
                         gen.scratch)
    return prog


class Kernel:
    """What a caller needs to call a whole program's kernel from other numba
    code (:mod:`tapestry.jit.items` loops over items with it): the
    dispatcher, the module it is imported from, its signature (numba types
    as source: the inputs', then the constants'), the number of inputs,
    the constant arrays, and per output how the wrapper rebuilds it
    (:func:`_output_kinds`)."""

    __slots__ = ("kern", "module", "sig", "n_inputs", "consts", "outputs", "into", "scratch")

    def __init__(self, kern, module, sig, n_inputs, consts, outputs, into=None, scratch=()):
        self.kern, self.module, self.sig, self.n_inputs = kern, module, sig, n_inputs
        self.consts, self.outputs = consts, outputs
        #: per output, whether ``kern_into`` adds it into an array passed
        #: after the constants (in output order) instead of returning it;
        #: ``None``: the module has no ``kern_into``
        self.into = into
        #: ``(shape, dtype letter)`` of each scratch array ``kern_into`` takes last
        self.scratch = scratch


def _into(gen):
    """:attr:`Kernel.into` of a generated kernel."""
    if gen.into is None:
        return None
    return [o.__class__ is Slot and o.i in gen.into for o in gen.outputs]


def _output_kinds(gen):
    """Per output: ``None`` where the kernel does not return it (a constant,
    an input handed back); else ``(dtype letter, shape, rebuild)`` with
    ``rebuild`` the 0-d array's dtype, the scalar type, or ``None`` (an
    array)."""
    kinds = []
    for o in gen.outputs:
        if o.__class__ is not Slot or o.i in gen.inputs:
            kinds.append(None)
            continue
        v = gen.vals[o.i]
        if v.array:
            kinds.append((v.dt, v.shape, gen.meta[o.i][1] if v.shape == () else None))
        else:
            kinds.append((v.dt, (), _SCALARS[v.scalar_type][1]))
    return kinds


class _Kernel:
    """The generated source of one program's kernel."""

    def __init__(self, steps, live, inputs, outputs, meta, scalars):
        self.steps, self.live, self.inputs, self.outputs = steps, live, inputs, outputs
        self.meta, self.scalars = meta, scalars
        self.vals: dict = {}
        self.body: list = []
        self.consts: list = []       # constant arrays, passed after the inputs
        self.zeros: set = set()      # slots made by zeros / zeros_like
        self.written: set = set()    # roots written in place (np.add.at)
        self.views_only: set = set()  # NumPy's read-only views, copies here: no outputs
        #: broadcast_to views whose nonzero strides are in C order (of a
        #: C-ordered source): NumPy lays out what it computes from them and
        #: C-ordered operands in C order, as the kernel does
        self.c_broadcasts: set = set()
        #: slot -> the body line making the zeros of a dense_scatter at one
        #: int (each item adds one position: kern_into)
        self.scatters: dict = {}
        self.zero_lines: dict = {}  # slot -> the line of its np.zeros (1-d float64)
        self.adds_at: dict = {}     # root -> [(step, positions added: 1 or None)]
        self.n_tmp = 0

    # --- values ------------------------------------------------------------------
    def _val_of(self, i, root, contig=True):
        m = self.meta.get(i)
        if m is not None:
            shape, dtype = m
            dt = _DTYPES.get(dtype)
            if dt is None:
                raise Unsupported(f"an array of dtype {dtype}")
            v = _Val(dt, tuple(shape), True, None, contig, root)
        else:
            t = self.scalars.get(i)
            if t not in _SCALARS:
                raise Unsupported(f"a value of type {getattr(t, '__name__', t)}")
            v = _Val(_SCALARS[t][0], (), False, t, True, root)
        self.vals[i] = v
        return v

    def _tmp(self):
        self.n_tmp += 1
        return f"t{self.n_tmp}"

    def _const_array(self, a):
        if a.dtype not in _DTYPES:
            raise Unsupported(f"a constant array of dtype {a.dtype}")
        for k, c in enumerate(self.consts):
            if c[0] is a:
                return f"k{k}"
        # a private, writable, C-contiguous copy (the kernel's signature);
        # an array of the environment is compared with this value before
        # every replay, so a copy of it is as good as the array
        self.consts.append((a, np.array(a, order="C")))
        return f"k{len(self.consts) - 1}"

    def operand(self, a, shape=None):
        """``(expression, dtype letter, shape)`` of an operand; an array's
        expression is indexed at ``i0, i1, ...`` of a loop of ``shape``
        (``None``: not in a loop)."""
        c = a.__class__
        if c is Slot:
            v = self.vals.get(a.i)
            if v is None:
                raise Unsupported("a value the kernel does not hold")
            if v.shape == () or shape is None:
                return f"v{a.i}", v.dt, v.shape
            return f"v{a.i}[{_index(v.shape, shape)}]", v.dt, v.shape
        if c is bool or c is np.bool_:
            return repr(bool(a)), "b", ()
        if c is int or c is np.int64:
            if not -2 ** 62 < a < 2 ** 62:
                raise Unsupported("a large integer constant")
            return repr(int(a)), "I" if c is int else "i", ()
        if c is float or c is np.float64:
            if not math.isfinite(a):
                raise Unsupported("a constant inf or nan")
            return repr(float(a)), "f", ()
        if c is np.ndarray:
            if a.shape == ():
                return self.operand(a[()].item() if a.dtype.kind == "f" else a[()], shape)
            name = self._const_array(a)
            if shape is None:
                return name, _DTYPES[a.dtype], a.shape
            return f"{name}[{_index(a.shape, shape)}]", _DTYPES[a.dtype], a.shape
        raise Unsupported(f"an argument of type {c.__name__}")

    # --- the steps -------------------------------------------------------------------
    def build(self):
        params, sig = [], []
        for i in self.inputs:
            v = self._val_of(i, i)
            if v.array:
                params.append(f"p{i}")
                sig.append(_array_type(v.dt, len(v.shape)))
                self.body.append(f"v{i} = p{i}[()]" if v.shape == () else f"v{i} = p{i}")
            else:
                if v.scalar_type is bool:
                    raise Unsupported("a bool argument")  # (static: part of the cache key)
                params.append(f"v{i}")
                sig.append(f"types.{_SIG_DTYPE['i' if v.dt == 'I' else v.dt]}")
        for k, s in enumerate(self.steps):
            if not self.live[k]:
                continue
            if s.err:
                raise Unsupported("a step inside np.errstate")
            if s.kind == "call":
                self.call(s)
            elif s.kind in ("bool", "int", "index", "float", "shape", "pin"):
                self.guard(s)
            else:
                raise Unsupported(f"a {s.kind} step")
        outs = self.check_outputs()
        sig += [_array_type(_DTYPES[c.dtype], c.ndim) for _, c in self.consts]
        params += [f"k{k}" for k in range(len(self.consts))]
        lines = ["import math", "import numpy as np", "from numba import njit, types",
                 "from tapestry.jit.vmath import _bits_of_f64, exp_in_range, vexp, vtanh",
                 "from tapestry.jit.whole_kernels import einsum_row, pairwise, sum_all"
                 f"  # helpers {_helpers_version()}", "",
                 f"@njit(({''.join(x + ', ' for x in sig)}), nogil=True, cache=True, "
                 'error_model="numpy")',
                 f"def kern({', '.join(params)}):",
                 "    bad = False"]
        lines += ["    " + b for b in self.body]
        lines.append(f"    return (bad, {', '.join(outs)}{',' if len(outs) == 1 else ''})")
        lines += self.adding_into(params, sig, outs)
        return "\n".join(lines) + "\n", sig

    def adding_into(self, params, sig, outs):
        """``kern_into``: the kernel with each output made by a dense_scatter
        at one int, or by ``np.zeros`` and one ``np.add.at`` of one value
        (``x[j]``'s gradient) added into an array the caller
        passes (after the constants) instead of into fresh zeros, and left
        out of the returned tuple.  A loop over items (:mod:`tapestry.jit.
        items`) then adds an item's gradient with respect to a long vector at
        its one position, not at all of them.  The bits are the loop's that
        adds whole arrays: ``acc[j] + v`` against ``acc[j] + (0.0 + v)``,
        where ``acc[j]``, a sum started at ``0.0 + v``, is never ``-0.0``.
        ``into`` is ``None`` where there is no such output.

        Each fresh array the kernel makes for a value it does not return
        (``np.empty`` of an elementwise result, an index's gather) is instead
        a scratch array the caller passes last (:attr:`scratch`: its shape and
        dtype letter): a loop over items allocates them once, not per item.
        Compiled lazily (no signature): only a loop over items calls it."""
        self.into, self.scratch = None, []
        zeros = dict(self.scatters)
        for root, adds in self.adds_at.items():  # np.zeros, then one np.add.at of one value
            if root in self.zero_lines and len(adds) == 1 and adds[0][1] == 1:
                zeros[root] = self.zero_lines[root]
        read, targets = set(), {id(a): a.args[0].i for adds in self.adds_at.values()
                                for a, _ in adds}
        for k, st in enumerate(self.steps):
            if self.live[k]:  # (an np.add.at reads its target only to add into it)
                read.update(i for i in reads_of(st) if i != targets.get(id(st)))
        into = [o.i for o in self.outputs if o.__class__ is Slot and o.i in zeros
                and o.i not in read and o.i not in self.inputs
                and all(v.root != o.i for i, v in self.vals.items() if i != o.i)]
        if len(set(into)) != len(into):
            into = []
        body = list(self.body)
        for i in into:  # (the scatter then adds into acc: acc[j] + v, as the
            body[zeros[i]] = f"v{i} = acc{i}"  # loop adds 0.0 + v: same bits)
        returned = {o.i for o in self.outputs if o.__class__ is Slot}
        returned |= {self.vals[i].root for i in returned if i in self.vals}
        scratch = []
        for k, line in enumerate(body):
            m = _EMPTY_LINE.match(line) or _FULL_LINE.match(line)
            if m is None or int(m.group(1)) in returned:
                continue
            i, shape = int(m.group(1)), eval(m.group(2))  # (a tuple of ints, matched)
            dt = _DTYPE_LETTER[m.group(m.lastindex)]
            if not shape:  # (views of a returned value: their root is in returned)
                continue
            fill = f"; v{i}.fill({m.group(3)})" if m.re is _FULL_LINE else ""
            body[k] = f"v{i} = scr{i}{fill}"
            scratch.append((i, shape, dt))
        if not into and not scratch:
            return []
        kept = [e for e in outs if int(e[1:]) not in into]  # (outs: "v<slot>")
        self.into, self.scratch = into, [(shape, dt) for _, shape, dt in scratch]
        extra = [f"acc{i}" for i in into] + [f"scr{i}" for i, _, _ in scratch]
        return ["", '@njit(nogil=True, cache=True, error_model="numpy")',
                f"def kern_into({', '.join(params + extra)}):",
                "    bad = False", *["    " + b for b in body],
                f"    return (bad, {''.join(e + ', ' for e in kept)})"]

    def call(self, s):
        fn = s.fn
        if s.out is None:
            if getattr(fn, "__self__", None) is np.add and getattr(fn, "__name__", "") == "at":
                return self.add_at(s)
            raise Unsupported(f"a write in place by {getattr(fn, '__name__', fn)}")
        if fn in _ARITH or fn in _TRANSCENDENTAL or fn is operator.pow or fn in _MORE_FLOAT \
                or fn in _BOOL:
            return self.elementwise(s)
        if fn in _MATMULS:
            return self.matmul(s)
        if fn in _TRANSPOSES:
            return self.transpose(s)
        if fn in _RESHAPE_LIKE:
            return self.reshape(s, like=True)
        if fn in _COPIES:
            return self.copy(s)
        if fn is _method("astype"):
            return self.astype(s)
        if fn in _COMPARE:
            return self.compare(s)
        if fn in _SUMS or fn is _sum_fun():
            return self.reduce_sum(s)
        if fn in _MINS or fn in _MAXS or fn in _extrema():
            return self.min_max(s)
        if fn in _RESHAPES or fn in _RAVELS:
            return self.reshape(s)
        if fn in _GETITEMS:
            return self.getitem(s)
        if fn is np.asarray:
            return self.asarray(s)
        if fn is np.zeros or fn is np.zeros_like:
            return self.zeros_step(s)
        if fn is _dense_scatter():
            return self.dense_scatter(s)
        if fn is np.broadcast_to:
            return self.broadcast_to(s)
        if fn is np.float64:
            return self.to_float64(s)
        if fn is np.einsum:
            return self.row_sums(s)
        raise Unsupported(f"a call of {getattr(fn, '__name__', fn)}")

    def to_float64(self, s):
        """``np.float64(x)`` of a Python or NumPy number (a differentiated
        Python float made a float64, as the plain call makes it)."""
        a = s.args[0] if len(s.args) == 1 and not s.kwargs else None
        src = self.vals.get(a.i) if a.__class__ is Slot else None
        if src is None or src.array or src.dt not in "fiI":
            raise Unsupported("np.float64 of other than a number")
        out = self._result(s)
        if out.array or out.dt != "f":
            raise Unsupported("np.float64 that is not a float64 number")
        self.body.append(f"v{s.out} = float(v{a.i})")

    def _result(self, s, root=None, contig=True):
        """The step's result; ``root``: the slot whose memory it views."""
        if root is not None and s.args and s.args[0].__class__ is Slot and \
                s.args[0].i in self.views_only:
            self.views_only.add(s.out)  # a view of a read-only view
        return self._val_of(s.out, s.out if root is None else root, contig)

    def _loop(self, shape, inner):
        """Lines of a loop nest over ``shape`` around ``inner`` (lines)."""
        lines, ind = [], ""
        for d, n in enumerate(shape):
            lines.append(f"{ind}for i{d} in range({n}):")
            ind += "    "
        return lines + [ind + x for x in inner]

    def elementwise(self, s):
        fn = s.fn
        if s.kwargs:
            raise Unsupported("an elementwise call with keywords")
        args = s.args
        if fn is operator.pow:
            e = args[1] if len(args) == 2 else None
            if e.__class__ not in (int, float) or e != 2:
                raise Unsupported("a power other than x ** 2")
            args = args[:1]
        out = self._result(s)
        shape = out.shape
        # NumPy lays the result out as its operands (order "K"): a transposed
        # operand makes it non-C, and a later whole sum adds in that order
        out.contig = not any(self._non_c(a) for a in args)
        ops, dts = [], []
        for a in args:
            e, dt, sh = self.operand(a, shape)
            if not _broadcasts(sh, shape):
                raise Unsupported("an operand that does not broadcast")
            ops.append(e)
            dts.append(dt)
        if fn is np.where:
            if len(ops) != 3 or dts[0] != "b":
                raise Unsupported("np.where of other than three arguments")
            value_dts = dts[1:]
        else:
            value_dts = dts
        if out.dt == "f":
            table = "({0} * {0})" if fn is operator.pow else (
                _ARITH.get(fn) or _TRANSCENDENTAL.get(fn) or _MORE_FLOAT.get(fn))
        elif out.dt == "i":
            if shape == () or any(d not in "iIb" for d in value_dts):
                raise Unsupported("integer arithmetic on scalars, or of other values")
            table = _INT.get(fn)
        elif out.dt == "b":
            if fn in _BOOL_ONLY and any(d != "b" for d in dts) or \
                    fn is np.where and any(d != "b" for d in value_dts):
                raise Unsupported("a logical operation on numbers")
            table = _BOOL.get(fn)
        else:
            table = None
        if table is None:
            raise Unsupported(f"{getattr(fn, '__name__', fn)} giving {out.dt}")
        if len(ops) != (3 if "{2}" in table else 2 if "{1}" in table else 1):
            raise Unsupported("an elementwise call with another number of arguments")
        expr = table.format(*ops)
        t = self._tmp()
        inner = [f"{t} = {expr}"]
        if out.dt == "f":
            inner.append(f"if ({t} - {t}) != 0.0: bad = True")
            if fn is np.maximum or fn is np.minimum:
                inner.append(f"if {_SIGNED_ZEROS.format(*ops)}: bad = True")
            if fn in _VECTORIZED:
                inner.append(f"if {_VECTORIZED[fn].format(ops[0])}: bad = True")
        if shape == ():
            self.body += inner + [f"v{s.out} = {t}"]
            return
        full = ", ".join(f"i{d}" for d in range(len(shape)))
        self.body.append(f"v{s.out} = np.empty({shape!r}, {_NUMBA_DTYPE[out.dt]})")
        self.body += self._loop(shape, inner + [f"v{s.out}[{full}] = {t}"])

    def _non_c(self, a):
        """Whether operand ``a`` is an array of 2 or more axes not in C order."""
        if a.__class__ is Slot:
            if a.i in self.c_broadcasts:
                return False
            v = self.vals.get(a.i)
            return v is not None and len(v.shape) >= 2 and not v.contig
        return a.__class__ is np.ndarray and a.ndim >= 2 and not a.flags.c_contiguous

    def matmul(self, s):
        if s.kwargs or len(s.args) != 2:
            raise Unsupported("a matmul with other arguments")
        out = self._result(s)
        (a, adt, ash), (b, bdt, bsh) = (self.operand(x) for x in s.args)
        if out.dt != "f" or adt != "f" or bdt != "f" or not (1 <= len(ash) <= 2) \
                or not (1 <= len(bsh) <= 2) or ash[-1] != bsh[0] or ash[-1] == 0:
            raise Unsupported("a matmul of other than float64 vectors and matrices")
        k = ash[-1]
        left = ["i0"] if len(ash) == 2 else []
        right = [f"i{len(left)}"] if len(bsh) == 2 else []
        shape = tuple(ash[:-1]) + tuple(bsh[1:])
        if shape != out.shape:
            raise Unsupported("a matmul whose shape is not the trace's")
        t = self._tmp()
        ai = ", ".join(left + ["p"])
        bi = ", ".join(["p"] + right)
        inner = [f"{t} = 0.0", f"for p in range({k}):", f"    {t} += {a}[{ai}] * {b}[{bi}]",
                 f"if ({t} - {t}) != 0.0: bad = True"]
        if shape == ():
            self.body += inner + [f"v{s.out} = {t}"]
            return
        full = ", ".join(left + right)
        self.body.append(f"v{s.out} = np.empty({shape!r}, np.float64)")
        self.body += self._loop(shape, inner + [f"v{s.out}[{full}] = {t}"])

    def transpose(self, s):
        a = s.args[0]
        src = self.vals.get(a.i) if a.__class__ is Slot else None
        if src is None or not src.array or s.kwargs:
            raise Unsupported("a transpose of a constant")
        nd = len(src.shape)
        rest = s.args[1:]
        if s.fn in (np.swapaxes, _method("swapaxes")):
            if len(rest) != 2 or any(x.__class__ is not int for x in rest):
                raise Unsupported("swapaxes of axes that are not constants")
            swap = nd == 2 and rest[0] % 2 != rest[1] % 2
        else:
            axes = rest[0] if len(rest) == 1 else (rest or None)
            if axes is not None and (axes.__class__ not in (tuple, list) or any(
                    x.__class__ is not int for x in axes)):
                raise Unsupported("transpose of axes that are not constants")
            swap = nd == 2 and (axes is None or [x % 2 for x in axes] == [1, 0])
            if axes is not None and nd == 2 and not swap and [x % 2 for x in axes] != [0, 1]:
                raise Unsupported("transpose of other axes")
        if nd > 2:
            raise Unsupported("a transpose of more than two axes")
        out = self._result(s, root=src.root, contig=src.contig and not swap)
        if out.shape != (src.shape[::-1] if swap else src.shape):
            raise Unsupported("a transpose whose shape is not the trace's")
        self.body.append(f"v{s.out} = v{a.i}.T" if swap else f"v{s.out} = v{a.i}")
        if swap and 1 in src.shape:
            out.contig = False  # (a view either way; layouts are NumPy's business)

    def copy(self, s):
        if s.kwargs or len(s.args) != 1:
            raise Unsupported("a copy with an order")
        a = s.args[0]
        src = self.vals.get(a.i) if a.__class__ is Slot else None
        if src is None or not src.array:
            raise Unsupported("a copy of a constant or a scalar")
        # np.copy keeps a transposed view's layout (order="K"): the kernel's
        # copy is C-ordered, so a later whole sum of it is not allowed
        self._result(s, contig=src.contig or s.fn is _method("copy"))
        self.body.append(f"v{s.out} = v{a.i}.copy()" if src.shape else f"v{s.out} = v{a.i}")

    def astype(self, s):
        a = s.args[0]
        src = self.vals.get(a.i) if a.__class__ is Slot else None
        kw = dict(s.kwargs or {})
        if src is None or not src.array or len(s.args) != 2 or set(kw) - {"copy"}:
            raise Unsupported("astype with other arguments")
        copy = kw.get("copy", True)
        same = np.dtype(s.args[1]) == self.meta[a.i][1]
        out = self._result(s, root=src.root if same and not copy else None,
                           contig=src.contig)  # (a copy keeps the layout: order "K")
        if same and not copy:
            self.body.append(f"v{s.out} = v{a.i}")
        elif out.dt == "f" and src.dt in "fib" and src.shape:
            self.body.append(f"v{s.out} = v{a.i}.astype(np.float64)")
        else:
            raise Unsupported("astype that converts to other than float64")

    def compare(self, s):
        if s.kwargs or len(s.args) != 2:
            raise Unsupported("a comparison with keywords")
        out = self._result(s)
        if out.dt != "b":
            raise Unsupported("a comparison that is not a bool")
        shape = out.shape
        out.contig = not any(self._non_c(a) for a in s.args)  # (NumPy's order "K")
        ops = []
        for a in s.args:
            e, dt, sh = self.operand(a, shape)
            if not _broadcasts(sh, shape):
                raise Unsupported("an operand that does not broadcast")
            ops.append((e, dt))
        if ops[0][1] == "b" or ops[1][1] == "b":
            if not (ops[0][1] == "b" and ops[1][1] == "b"):
                raise Unsupported("a comparison of a bool with a number")
        expr = f"({ops[0][0]} {_COMPARE[s.fn]} {ops[1][0]})"
        if shape == ():
            self.body.append(f"v{s.out} = {expr}")
            return
        full = ", ".join(f"i{d}" for d in range(len(shape)))
        self.body.append(f"v{s.out} = np.empty({shape!r}, np.bool_)")
        self.body += self._loop(shape, [f"v{s.out}[{full}] = {expr}"])

    def _reduction_args(self, s):
        """``(operand slot value, axis, keepdims)`` of a sum / min / max call."""
        fn = s.fn
        args = list(s.args)
        kw = dict(s.kwargs or {})
        if fn is _sum_fun() or fn in _extrema():
            if len(args) != 3 or kw:
                raise Unsupported("a sum with other arguments")
            a, axis, keep = args
        else:
            a = args[0]
            names = ["axis", "dtype" if fn in _SUMS else "out", "out" if fn in _SUMS
                     else "keepdims", "keepdims"]
            for k, v in zip(names, args[1:]):
                kw[k] = v
            if set(kw) - {"axis", "keepdims"} or len(args) > 4:
                raise Unsupported("a reduction with other arguments")
            axis, keep = kw.get("axis", 0 if fn == _ADD_REDUCE else None), \
                kw.get("keepdims", False)
        if a.__class__ is not Slot or a.i not in self.vals:
            raise Unsupported("a reduction of a constant")
        v = self.vals[a.i]
        if keep not in (False, True) or not v.array or v.shape == ():
            raise Unsupported("a reduction of a 0-d value")
        nd = len(v.shape)
        if axis is None:
            axis = tuple(range(nd))
        axis = (axis,) if axis.__class__ is int else axis
        if axis.__class__ is not tuple or any(x.__class__ is not int for x in axis):
            raise Unsupported("a reduction over an axis that is not a constant")
        axis = tuple(sorted({x % nd for x in axis}))
        return a.i, v, axis, keep

    def _reduced(self, s, t):
        """Store the reduced scalar ``t`` as the step's result (an array of
        ones' shape under keepdims)."""
        out = self._result(s)
        if out.shape == ():
            self.body.append(f"v{s.out} = {t}")
        else:
            self.body.append(f"v{s.out} = np.full({out.shape!r}, {t}, {_NUMBA_DTYPE[out.dt]})")
        return out

    def reduce_sum(self, s):
        i, v, axis, keep = self._reduction_args(s)
        nd = len(v.shape)
        out_dt = _DTYPES.get(self.meta[s.out][1]) if s.out in self.meta else \
            _SCALARS.get(self.scalars.get(s.out), ("?",))[0]
        t = self._tmp()
        if v.dt in "ib" and out_dt == "i":
            if axis != tuple(range(nd)):  # (integer sums are exact in any order)
                raise Unsupported("an integer sum along an axis")
            flat = f"v{i}" if nd == 1 else f"v{i}.ravel()"
            x = self._tmp()
            self.body += [f"{t} = 0", f"for {x} in {flat}:", f"    {t} += {x}"]
            self._reduced(s, t)
            return
        if v.dt != "f" or out_dt != "f":
            raise Unsupported("a sum not in float64")
        if axis == tuple(range(nd)):
            if nd == 1:
                self.body.append(f"{t} = sum_all(v{i})")
            elif v.contig:
                self.body.append(f"{t} = sum_all(v{i}.reshape({math.prod(v.shape)}))")
            else:
                raise Unsupported("a whole sum of a strided array")
            self.body.append(f"if ({t} - {t}) != 0.0: bad = True")
            self._reduced(s, t)
            return
        if nd != 2 or not v.contig:
            raise Unsupported("a sum along an axis of other than a 2-d array")
        m, n = v.shape
        if m < 2 or n < 2:
            raise Unsupported("a sum along an axis of length 1")
        out = self._result(s)
        r = self._tmp()
        if axis == (1,):
            self.body.append(f"{r} = np.empty(({m},), np.float64)")
            self.body += self._loop((m,), [f"{t} = sum_all(v{i}[i0])",
                                           f"if ({t} - {t}) != 0.0: bad = True",
                                           f"{r}[i0] = {t}"])
        else:  # axis 0: NumPy adds the rows one after the other into zeros
            self.body.append(f"{r} = np.empty(({n},), np.float64)")
            self.body += self._loop((n,), [f"{t} = 0.0",
                                           f"for p in range({m}):",
                                           f"    {t} += v{i}[p, i0]",
                                           f"if ({t} - {t}) != 0.0: bad = True",
                                           f"{r}[i0] = {t}"])
        self.body.append(f"v{s.out} = {r}.reshape({out.shape!r})" if keep else f"v{s.out} = {r}")

    def row_sums(self, s):
        """``np.einsum("abc->a", x)``: ``x`` summed over its trailing axes
        (:func:`tapestry.core.batching.trailing_sum`, the unbroadcasting of
        many short rows), each row in einsum's own order (``einsum_row``)."""
        if s.kwargs or len(s.args) != 2 or s.args[0].__class__ is not str:
            raise Unsupported("an einsum other than row sums")
        spec, a = s.args
        v = self.vals.get(a.i) if a.__class__ is Slot else None
        if v is None or not v.array or v.dt != "f" or not v.contig:
            raise Unsupported("an einsum of other than a contiguous float64 array")
        nd = len(v.shape)
        letters = "abcdefghijklmnopqrstuvwxyz"[:nd]
        lhs, _, rhs = spec.partition("->")
        if lhs != letters or not rhs or not letters.startswith(rhs) or rhs == letters:
            raise Unsupported("an einsum other than row sums")
        rows, n = math.prod(v.shape[:len(rhs)]), math.prod(v.shape[len(rhs):])
        out = self._result(s)
        if out.dt != "f" or out.shape != v.shape[:len(rhs)] or n == 0:
            raise Unsupported("an einsum other than row sums")
        r, t, flat = self._tmp(), self._tmp(), self._tmp()
        self.body += [f"{flat} = v{a.i}.reshape({rows * n})",
                      f"{r} = np.empty(({rows},), np.float64)"]
        self.body += self._loop((rows,), [f"{t} = einsum_row({flat}, i0 * {n}, {n})",
                                          f"if ({t} - {t}) != 0.0: bad = True",
                                          f"{r}[i0] = {t}"])
        self.body.append(f"v{s.out} = {r}.reshape({out.shape!r})")

    def min_max(self, s):
        i, v, axis, keep = self._reduction_args(s)
        if axis != tuple(range(len(v.shape))) or v.dt not in "fi":
            raise Unsupported("a min / max along an axis")
        if not v.contig or math.prod(v.shape) == 0:
            raise Unsupported("a min / max of a strided or empty array")
        small = s.fn in _MINS or _extrema().get(s.fn) == "min"
        op = "<" if small else ">"
        t, x = self._tmp(), self._tmp()
        flat = f"v{i}" if len(v.shape) == 1 else f"v{i}.reshape({math.prod(v.shape)})"
        loop = [f"{t} = {flat}[0]",
                f"for {x} in {flat}:",
                f"    if {x} {op} {t}: {t} = {x}"]
        if v.dt == "f":
            mixed = self._tmp()
            loop[1:1] = [f"{mixed} = False"]
            loop += [f"    if {x} != {x}: bad = True",  # a nan: NumPy's result and warning
                     # equal zeros of either sign: which one NumPy's SIMD reduction
                     # returns is its own, so the program computes an extremum of
                     # zero where both occur (once t is a zero, every zero meets it)
                     f"    if {x} == {t} and {x} == 0.0 and "
                     f"math.copysign(1.0, {x}) != math.copysign(1.0, {t}): {mixed} = True",
                     f"if {mixed} and {t} == 0.0: bad = True"]
        self.body += loop
        if self._reduced(s, t).dt != v.dt:
            raise Unsupported("a min / max that changes the dtype")

    def reshape(self, s, like=False):
        """``reshape`` / ``ravel``; ``like``: ``expand_dims`` / ``squeeze``
        (the same view: the trace's shape)."""
        if s.kwargs or any(x.__class__ is str and x != "C" for x in s.args[1:]):
            raise Unsupported("a reshape in another order")  # ("F": another element order)
        a = s.args[0]
        if a.__class__ is not Slot or a.i not in self.vals:
            raise Unsupported("a reshape of a constant")
        src = self.vals[a.i]
        out = self._result(s, root=src.root if src.array else None)
        if out.dt != src.dt and not (src.dt == "I" and out.dt == "i"):
            raise Unsupported("a reshape that changes the dtype")
        if out.shape == ():
            if src.shape == ():
                self.body.append(f"v{s.out} = v{a.i}")
            else:
                self.body.append(f"v{s.out} = v{a.i}[{', '.join(['0'] * len(src.shape))}]")
            return
        if src.shape == ():
            self.body.append(f"v{s.out} = np.full({out.shape!r}, v{a.i}, "
                             f"{_NUMBA_DTYPE[out.dt]})")
            out.root = s.out if not src.array else src.root
            return
        if not src.contig:
            raise Unsupported("a reshape of a strided view")
        self.body.append(f"v{s.out} = v{a.i}.reshape({out.shape!r})")

    def getitem(self, s):
        if s.kwargs or len(s.args) != 2:
            raise Unsupported("an index with keywords")
        a, idx = s.args
        if a.__class__ is not Slot or a.i not in self.vals:
            raise Unsupported("an index into a constant")
        if _new_axes_only(idx):
            return self.new_axes(s)
        if idx.__class__ is tuple:
            if len(idx) != 1:
                raise Unsupported("an index of more than one axis")
            idx = idx[0]
        src = self.vals[a.i]
        if not src.array or len(src.shape) != 1 or src.shape[0] == 0:
            raise Unsupported("an index into other than a nonempty 1-d array")
        n = src.shape[0]
        if idx.__class__ is slice:
            bounds = (idx.start, idx.stop, idx.step)
            if any(b is not None and b.__class__ is not int for b in bounds) or idx.step == 0:
                raise Unsupported("a slice with bounds that are not constants")
            out = self._result(s, root=src.root, contig=src.contig and idx.step in (None, 1))
            if out.dt != src.dt:
                raise Unsupported("a slice that changes the dtype")
            txt = ":".join("" if b is None else repr(b) for b in bounds)
            self.body.append(f"v{s.out} = v{a.i}[{txt}]")
            return
        e, dt, sh = self.operand(idx)
        if dt not in "iI":
            raise Unsupported("an index that is not an integer")
        out = self._result(s)
        if out.dt != src.dt:
            raise Unsupported("an index that changes the dtype")
        if sh == ():
            j = self._tmp()
            self.body += [f"{j} = {e}", *self._wrap(j, n), f"v{s.out} = v{a.i}[{j}]"]
            if out.array:
                raise Unsupported("an index giving a 0-d array")
            return
        if len(sh) != 1 or out.shape != sh:
            raise Unsupported("an index array of other than one axis")
        j = self._tmp()
        self.body.append(f"v{s.out} = np.empty({sh!r}, {_NUMBA_DTYPE[out.dt]})")
        self.body += self._loop(sh, [f"{j} = {e}[i0]", *self._wrap(j, n),
                                     f"v{s.out}[i0] = v{a.i}[{j}]"])

    def new_axes(self, s):
        """``x[:, None]``, ``x[None]``: a view with axes of length 1 added
        (the trace's shape), made as a reshape."""
        src = self.vals[s.args[0].i]
        out = self._result(s, root=src.root if src.array else None, contig=src.contig)
        if not src.array or out.dt != src.dt or not src.contig:
            raise Unsupported("new axes on other than a contiguous array")
        if tuple(d for d in out.shape if d != 1) != tuple(d for d in src.shape if d != 1):
            raise Unsupported("new axes with another shape")
        if src.shape == ():
            self.body.append(f"v{s.out} = np.full({out.shape!r}, v{s.args[0].i}, "
                             f"{_NUMBA_DTYPE[out.dt]})")
            out.root = s.out
            return
        self.body.append(f"v{s.out} = v{s.args[0].i}.reshape({out.shape!r})")

    @staticmethod
    def _wrap(j, n):
        """NumPy's index rule: a negative index counts from the end; out of
        bounds flags the kernel (the program raises NumPy's IndexError)."""
        return [f"if {j} < 0: {j} += {n}",
                f"if {j} < 0 or {j} >= {n}:",
                "    bad = True",
                f"    {j} = 0"]

    def asarray(self, s):
        if s.kwargs or len(s.args) != 1:
            raise Unsupported("np.asarray with a dtype")
        a = s.args[0]
        if a.__class__ is not Slot or a.i not in self.vals:
            raise Unsupported("np.asarray of a constant")
        src = self.vals[a.i]
        out = self._result(s, root=src.root if src.array else None, contig=src.contig)
        if out.dt != src.dt or out.shape != src.shape:
            raise Unsupported("np.asarray that converts")
        self.body.append(f"v{s.out} = v{a.i}")

    def zeros_step(self, s):
        kw = s.kwargs or {}
        if set(kw) - {"shape", "dtype"} or len(s.args) != 1:
            raise Unsupported("np.zeros with other arguments")
        if s.fn is np.zeros_like:
            a = s.args[0]
            if a.__class__ is Slot:
                v = self.vals.get(a.i)
                if v is None or (len(v.shape) > 1 and not v.contig):
                    raise Unsupported("np.zeros_like of a strided array")
        out = self._result(s)
        if not out.array or out.shape == ():
            raise Unsupported("np.zeros of a 0-d array")
        self.zeros.add(s.out)
        if out.dt == "f" and len(out.shape) == 1:
            self.zero_lines[s.out] = len(self.body)
        self.body.append(f"v{s.out} = np.zeros({out.shape!r}, {_NUMBA_DTYPE[out.dt]})")

    def broadcast_to(self, s):
        """``np.broadcast_to``: NumPy's read-only view, made here as an
        array of its values (read only by later steps: never an output)."""
        if s.kwargs or len(s.args) != 2:
            raise Unsupported("broadcast_to with other arguments")
        a = s.args[0]
        src = self.vals.get(a.i) if a.__class__ is Slot else None
        out = self._result(s, root=src.root if src is not None and src.array else None)
        e, dt, sh = self.operand(a, out.shape)
        if dt != out.dt or not _broadcasts(sh, out.shape):
            raise Unsupported("broadcast_to of another dtype")
        self.views_only.add(s.out)
        out.contig = len(out.shape) <= 1  # (zero strides: NumPy's order is its own)
        if src is None or not src.array or src.contig or len(src.shape) <= 1:
            if a.__class__ is not np.ndarray or a.ndim <= 1 or a.flags.c_contiguous:
                self.c_broadcasts.add(s.out)
        if out.shape == ():
            self.body.append(f"v{s.out} = {e}")
            return
        full = ", ".join(f"i{d}" for d in range(len(out.shape)))
        self.body.append(f"v{s.out} = np.empty({out.shape!r}, {_NUMBA_DTYPE[out.dt]})")
        self.body += self._loop(out.shape, [f"v{s.out}[{full}] = {e}"])

    def dense_scatter(self, s):
        """tapestry's gradient of ``x[key]`` (zeros with ``g`` added at
        ``key``) into a 1-d array: ``key`` an int array (repeats add up, as
        ``np.add.at``), an int or a constant slice."""
        kw = s.kwargs or {}
        if len(s.args) not in (3, 4) or set(kw) - {"dtype"}:
            raise Unsupported("dense_scatter with other arguments")
        g, key, shape = s.args[:3]
        dtype = s.args[3] if len(s.args) == 4 else kw.get("dtype")
        if dtype is not None and np.dtype(dtype) != np.float64:
            raise Unsupported("dense_scatter into another dtype")
        out = self._result(s)
        if _new_axes_only(key):  # x[:, None]'s gradient: g without those axes
            return self._dropped_axes(s, g, out, shape)
        if out.dt != "f" or len(out.shape) != 1 or out.shape[0] == 0 or \
                tuple(shape) != out.shape:
            raise Unsupported("dense_scatter into other than a 1-d float64 array")
        if key.__class__ is tuple:
            if len(key) != 1:
                raise Unsupported("dense_scatter at more than one axis")
            key = key[0]
        n = out.shape[0]
        ge, gdt, gsh = self.operand(g)
        if gdt != "f":
            raise Unsupported("dense_scatter of other than float64 values")
        zeros_line = len(self.body)
        self.body.append(f"v{s.out} = np.zeros(({n},), np.float64)")
        if key.__class__ is slice:
            bounds = (key.start, key.stop, key.step)
            if any(b is not None and b.__class__ is not int for b in bounds) or key.step == 0:
                raise Unsupported("a slice with bounds that are not constants")
            size = len(range(*key.indices(n)))
            if gsh not in ((), (size,)):
                raise Unsupported("dense_scatter of values of another shape")
            txt = ":".join("" if b is None else repr(b) for b in bounds)
            self.body.append(f"v{s.out}[{txt}] = {ge}")
            return
        ie, idt, ish = self.operand(key)
        if idt not in "iI" or len(ish) > 1 or gsh not in ((), ish, (1,)):
            raise Unsupported("dense_scatter at other than an int or an int array")
        if ish in ((), (1,)):
            self.scatters[s.out] = zeros_line
        self._scatter_add(f"v{s.out}", n, ie, ish, ge, gsh)

    def _dropped_axes(self, s, g, out, shape):
        """``dense_scatter(g, (:, None), shape)``: ``g`` (the gradient of a
        view with new axes) copied into an array of the input's shape."""
        gv = self.vals.get(g.i) if g.__class__ is Slot else None
        if gv is None or not gv.array or not gv.contig or gv.dt != "f" or out.dt != "f" \
                or tuple(shape) != out.shape or out.shape == () \
                or [d for d in gv.shape if d != 1] != [d for d in out.shape if d != 1]:
            raise Unsupported("dense_scatter at new axes of another shape")
        self.body.append(f"v{s.out} = v{g.i}.reshape({out.shape!r}).copy()")

    def _scatter_add(self, target, n, ie, ish, ve, vsh):
        """``np.add.at(target, idx, values)`` on a 1-d float64 ``target`` of
        length ``n``: one element after the other, as NumPy adds them."""
        m = ish[0] if ish else 1
        j, t = self._tmp(), self._tmp()
        get_i = f"{ie}[i0]" if ish else ie
        get_v = ve if vsh == () else (f"{ve}[0]" if vsh == (1,) and ish != (1,) else f"{ve}[i0]")
        self.body += self._loop((m,), [f"{j} = {get_i}", *self._wrap(j, n),
                                       f"{t} = {target}[{j}] + {get_v}",
                                       f"if ({t} - {t}) != 0.0: bad = True",
                                       f"{target}[{j}] = {t}"])

    def add_at(self, s):
        if s.kwargs or len(s.args) != 3:
            raise Unsupported("np.add.at with other arguments")
        a, idx, vals = s.args
        if idx.__class__ is tuple:
            if len(idx) != 1:
                raise Unsupported("np.add.at at more than one axis")
            idx = idx[0]
        tv = self.vals.get(a.i) if a.__class__ is Slot else None
        if tv is None or tv.root in self.inputs or tv.root is None or len(tv.shape) != 1 \
                or tv.dt != "f" or tv.shape[0] == 0:
            raise Unsupported("np.add.at into other than a 1-d float64 array")
        self.written.add(tv.root)
        n = tv.shape[0]
        ie, idt, ish = self.operand(idx)
        if idt not in "iI" or len(ish) > 1:
            raise Unsupported("np.add.at at an index that is not an int or an int array")
        self.adds_at.setdefault(tv.root, []).append(
            (s, 1 if ish in ((), (1,)) and a.i == tv.root else None))
        ve, vdt, vsh = self.operand(vals)
        if vdt != "f" or vsh not in ((), ish, (1,)):
            raise Unsupported("np.add.at of values of another shape")
        self._scatter_add(f"v{a.i}", n, ie, ish, ve, vsh)

    def guard(self, s):
        a = s.args[0]
        v = self.vals.get(a.i) if a.__class__ is Slot else None
        if v is None:
            raise Unsupported("a guard on a value the kernel does not hold")
        if s.kind == "shape":
            shape, dtype = s.value
            if v.array:
                ok = self.meta[a.i] == (tuple(shape), dtype)
            else:
                ok = shape == () and np.dtype(v.scalar_type) == dtype \
                    if issubclass(v.scalar_type, np.generic) else False
            if not ok:
                raise Unsupported("a shape guard the trace's shapes do not meet")
            return  # every shape the kernel makes is the trace's
        if v.shape != ():
            raise Unsupported(f"a {s.kind} guard on an array")
        if s.kind == "pin":  # the value itself (np.asarray, .item()): its dtype and bits
            pv = s.value
            dt = "i" if v.dt == "I" else v.dt
            if pv.__class__ is not np.ndarray or pv.shape != () or _DTYPES.get(pv.dtype) != dt:
                raise Unsupported("a pin guard on other than a number")
            if dt == "f":
                bits = int(pv.view(np.int64))
                self.body.append(f"if _bits_of_f64(v{a.i}) != {bits}: bad = True")
            else:
                self.body.append(f"if v{a.i} != {pv.item()!r}: bad = True")
        elif s.kind == "bool":
            self.body.append(f"if (v{a.i} != 0) != {bool(s.value)!r}: bad = True")
        elif s.kind in ("int", "index"):
            if v.dt not in "iIb" or s.value.__class__ is not int or not -2 ** 62 < s.value < 2 ** 62:
                raise Unsupported(f"an {s.kind} guard on a float")
            self.body.append(f"if v{a.i} != {s.value!r}: bad = True")
        else:  # float: the same bits (a nan was flagged where it was made)
            if v.dt != "f" or s.value.__class__ is not float:
                raise Unsupported("a float guard on an integer")
            bits = int(np.float64(s.value).view(np.int64))
            self.body.append(f"if _bits_of_f64(v{a.i}) != {bits}: bad = True")

    def check_outputs(self):
        """The kernel's return values (one per output slot; constants are
        the wrapper's), declining outputs that share memory."""
        outs, roots = [], {}
        for o in self.outputs:
            if o.__class__ is not Slot:
                if o.__class__ is np.ndarray or o is None or o.__class__ in (
                        int, float, bool, str, complex) or isinstance(o, np.generic):
                    continue
                raise Unsupported(f"an output of type {o.__class__.__name__}")
            if o.i in self.inputs:  # handed back as it came, as the program does
                continue
            v = self.vals.get(o.i)
            if v is None:
                raise Unsupported("an output the kernel does not make")
            if o.i in self.views_only:
                raise Unsupported("an output that is a read-only view (np.broadcast_to)")
            if v.array:
                if v.root in self.inputs:
                    raise Unsupported("an output that is (or views) an argument")
                r = self.vals.get(v.root)
                if r is not None and not r.contig and sum(d > 1 for d in r.shape) >= 2:
                    # NumPy lays out what it computes from a transposed operand
                    # as that operand (order "K"); the kernel makes C order
                    raise Unsupported("an output NumPy lays out in another order than C")
                if v.root in roots:
                    raise Unsupported("two outputs that share memory")
                roots[v.root] = o.i
            outs.append(f"v{o.i}")
        for i, v in self.vals.items():  # a 0-d view of a written array is a copy here
            if v.root in self.written and v.shape == ():
                if v.array:
                    raise Unsupported("a 0-d view of an array written in place")
        return outs


def _new_axes_only(idx):
    """Whether ``x[idx]`` only adds axes: ``None`` entries and whole
    slices (``:``)."""
    if idx is None:
        return True
    if idx.__class__ is not tuple or None not in idx:
        return False
    return all(k is None or (k.__class__ is slice and k == slice(None)) for k in idx)


def _broadcasts(small, shape):
    if len(small) > len(shape):
        return False
    off = len(shape) - len(small)
    return all(d == shape[off + k] or d == 1 for k, d in enumerate(small))


#: A top-level line making a fresh array for a slot (:meth:`_Kernel.adding_into`).
_EMPTY_LINE = re.compile(r"^v(\d+) = np\.empty\((\([\d, ]*\)), (np\.\w+)\)$")
_FULL_LINE = re.compile(r"^v(\d+) = np\.full\((\([\d, ]*\)), (v\d+|t\d+), (np\.\w+)\)$")
_DTYPE_LETTER = {v: k for k, v in _NUMBA_DTYPE.items()}


def _array_type(dt, ndim):
    """numba's type (as source) of a writable C-contiguous array."""
    return f'types.Array(types.{_SIG_DTYPE[dt]}, {ndim}, "C")'


def _helpers_version():
    from .whole_kernels import version
    return version()


def _wrapper(kern, sig, gen, fallback, name):
    """The Python function around ``kern``: call it, run ``fallback`` on a
    flag (or arguments outside its signature), rebuild the outputs' types."""
    ns = {"kern": kern, "fallback": fallback, "np": np}
    params = ", ".join(f"v{i}" for i in gen.inputs)
    consts = [c for _, c in gen.consts]
    for k, c in enumerate(consts):
        ns[f"k{k}"] = c
    call_args = ", ".join([f"v{i}" for i in gen.inputs] + [f"k{k}" for k in range(len(consts))])
    outs, pos = [], 1
    held: dict = {}

    def const(c, copy=True):  # (for _fresh_constants: the program's constants)
        n = held.get(id(c))
        if n is None:
            n = held[id(c)] = f"c{len(ns)}"
            ns[n] = private_copy(c) if copy and c.__class__ is np.ndarray else c
        return n
    made = []  # (constants returned that share memory: one copy of their base per call)
    fresh = _fresh_constants([o for o in gen.outputs if o.__class__ is np.ndarray], const,
                             made)
    for o in gen.outputs:
        if o.__class__ is not Slot:
            if o.__class__ is np.ndarray:
                outs.append(fresh(o))  # (the constant's layout, as the program)
            else:
                n = f"c{len(ns)}"
                ns[n] = o
                outs.append(n)
            continue
        if o.i in gen.inputs:
            outs.append(f"v{o.i}")
            continue
        v = gen.vals[o.i]
        r = f"r[{pos}]"
        pos += 1
        if v.array and v.shape == ():
            n = f"d{len(ns)}"
            ns[n] = gen.meta[o.i][1]
            outs.append(f"np.array({r}, {n})")
        elif not v.array:
            n = f"s{len(ns)}"
            ns[n] = _SCALARS[v.scalar_type][1]
            outs.append(f"{n}({r})")
        else:
            outs.append(r)
    lines = [f"def {name}_whole({params}):",
             "    try:",
             f"        r = kern({call_args})",
             "    except (TypeError, OverflowError):  # arguments outside its signature",
             f"        return fallback({params})",
             "    if r[0]:  # an inf or nan, an index out of bounds, a failed guard",
             f"        return fallback({params})", *made,
             f"    return ({', '.join(outs)}{',' if len(outs) == 1 else ''})"]
    src = "\n".join(lines) + "\n"
    exec(compile(src, f"<tapestry.jit {name}_whole>", "exec"), ns)
    return ns[f"{name}_whole"], src
