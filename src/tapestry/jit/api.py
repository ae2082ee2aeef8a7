"""``tapestry.jit``: trace a function once per input signature, replay it after.

The first call with a given signature (the arguments' tree structure, the
shapes and dtypes of their arrays, the types of their numbers, the values
of static arguments) runs the function on staged values
(:mod:`tapestry.core.staged`), which write down every NumPy call, and
lowers the record to a straight-line Python function
(:mod:`tapestry.jit.program`).  Later calls with that signature check the
environment's guards (:mod:`tapestry.jit.env`) and run the program; a
failed guard (Python read a value that is different now, a closed-over
array changed) traces again.  Past ``max_traces`` traces of one signature,
or when the function does something a replay cannot reproduce (random
draws, writes into its environment, a write into a plain array), it runs
uncompiled from then on, with one warning naming the reason and the line
(``strict=True`` raises instead).

``jit`` composes with the transformations by tracing through them:
``jit(grad(f))``, ``jit(vmap(f))``, ``jit(jvp(...))`` record the whole
computation (forward, sweeps, batching rules) and replay it.  A jitted
function called on values traced by an enclosing transformation
(``grad(jit(f))``, ``vmap(jit(f))``, a jit inside another jit) runs inline
in it: the enclosing trace sees the operations, as without ``jit``.
"""
from __future__ import annotations

import functools
import os
import sys
import threading
import warnings
from collections import OrderedDict

import numpy as np

from ..core.batched import Batched, Unbatched
from ..core.pytree import aux_holding, map_aux, map_dict_keys, tree_flatten
from ..core.staged import Recorder, Slot, Staged, Unstageable, state_guards
from ..core.tape import same_bits
from ..core.var import Var
from ..sparse import AxisSparse
from .containers import (_PLAIN_OUTPUTS, _containers_changed, _copied_containers, _mirror,
                         fresh_aux_builder, returned_container)
from .env import (EntropyWatch, ReachesTraced, WarnWatch, environment, raw_rng_states,
                  rng_changed, rng_states)
from .fuse import available as fuse_available
from .order import aux_key, call_key, input_order, typed
from .program import GuardFailed, Rebuild, _root, held_constants, lower
from .slots import output_builder
from .reverse import DEFERRED, RAN_ONCE as _RAN_ONCE, call_on_traced


class JitError(RuntimeError):
    """Raised by a ``strict`` jit where the default would run uncompiled."""


class JitWarning(UserWarning):
    """A jitted function runs uncompiled (once per function and reason)."""


_INLINE = object()


def _deferred_or_inline(jf, args, kwargs):
    """``DEFERRED`` where this call of ``jf`` is the one
    ``reverse.call_on_traced`` makes on a differentiated call's plain values
    (``_RAN_ONCE.defer``; not a call ``f`` makes of ``jf`` inside), else
    ``_INLINE``: a call that gives up before ``f`` ran runs it for real, and
    under ``grad`` the tape would run it once more -- a counter stepped
    twice, the gradient of the second run."""
    d = getattr(_RAN_ONCE, "defer", None)
    if d is None or d[0] is not jf or len(d[1]) != len(args) or \
            any(a is not b for a, b in zip(d[1], args)) or d[2].keys() != kwargs.keys() or \
            any(d[2][k] is not kwargs[k] for k in kwargs):
        return _INLINE
    _RAN_ONCE.defer = None
    return DEFERRED
_TRACED = frozenset({Var, Batched, Unbatched, Staged})
_RUNTIME_SCALARS = frozenset({float, int, complex})
_STATIC_SCALARS = frozenset({bool, str, bytes, type(None)})
_LOG = os.environ.get("TAPESTRY_JIT_LOG", "") not in ("", "0")
_NO_FUSE = os.environ.get("TAPESTRY_JIT_FUSE", "") == "0"


def _signature(leaves):
    """``(key, runtime positions, static objects)`` of flattened arguments,
    or ``_INLINE`` if a traced value is among them."""
    key = []
    runtime = []
    objects = []
    for i, x in enumerate(leaves):
        c = x.__class__
        if c is np.ndarray:
            key.append((x.shape, x.dtype))
            runtime.append(i)
        elif c in _RUNTIME_SCALARS:
            key.append(c)
            runtime.append(i)
        elif c in _STATIC_SCALARS:
            key.append((c, x))
        elif c in _TRACED:
            return _INLINE
        elif isinstance(x, np.generic):
            key.append((c, x.dtype))
            runtime.append(i)
        elif isinstance(x, np.ndarray):
            # (a masked array, a matrix: the trace reads it as a constant,
            # guarded in place like the objects; another one traces again)
            key.append(("subclass", c, id(x)))
            objects.append(x)
        else:
            key.append(("object", id(x)))
            objects.append(x)
    if len(leaves) > 1 and len(set(map(id, leaves))) < len(leaves):
        runtime = _repeated_arrays(leaves, key, runtime)
    return tuple(key), runtime, objects


def _repeated_arrays(leaves, key, runtime):
    """``f(x, x)``: an array that is also an earlier leaf is one input, seen
    twice (``x is y`` in the function), its key naming the first place;
    returns the runtime positions without the repeats."""
    first: dict = {}
    kept = []
    for i in runtime:
        x = leaves[i]
        if x.__class__ is np.ndarray:
            j = first.setdefault(id(x), i)
            if j != i:
                key[i] = ("same as leaf", j)
                continue
        kept.append(i)
    return kept


class _Entry:
    """What the cache holds for one signature: its programs (one per path
    through the guards met so far), how many traces it took, and whether it
    gave up (``eager``: the reason)."""

    __slots__ = ("programs", "traces", "eager", "objects", "order", "signature",
                 "inline_sums")

    def __init__(self, objects, order, signature):
        self.programs: list = []
        self.traces = 0
        self.eager = None
        self.objects = objects  # static objects of the key, held so their ids stay unique
        #: where the program's inputs are among call_key's (None: in order).
        #: Programs take their inputs in tree_flatten's order (dict values
        #: by sorted key), which code calling a program or its whole-program
        #: kernel directly relies on, so a hit permutes the walk's instead.
        self.order = order
        #: ``(treedef, leaf key, static key, aux key)``, for the next miss's message
        self.signature = signature
        #: trace ``parallel_sum`` inline, not as one step of the program: a
        #: trace found that what a step's ``f`` reads changed after the step
        self.inline_sums = False

    def retrace_inline(self, rec, miss):
        """Whether an end check of the trace ``rec`` failed (see
        :attr:`Recorder.end_checks`): its program is not kept, and the next
        trace of this signature runs ``parallel_sum`` inline."""
        for check in rec.end_checks:
            why = check()
            if why is not None:
                self.inline_sums = True
                miss(f"{why}; parallel_sum is traced inline from now on")
                return True
        return False


class _Compiled:
    """One program of a signature, what it was lowered from (to lower it
    again with fused loops once it is hot), and how often it ran."""

    __slots__ = ("program", "env", "out_td", "lowering", "replays", "traced", "split",
                 "unchanged", "build")

    def __init__(self, program, env, out_td, lowering, traced=None):
        self.program, self.env, self.out_td = program, env, out_td
        #: env's checks as one function (None: nothing to check)
        self.unchanged = env.compiled_check() if len(env) else None
        self.build = output_builder(out_td)  # the output tree from the program's leaves
        self.lowering = lowering  # (recorder, input slots, outputs, env arrays, name)
        self.replays = 0
        #: ``(lowering, runtime leaf positions)`` kept for a jit that asked
        #: for it (``keep_trace``: the joint pullback of reverse.py splits it)
        self.traced = traced
        self.split = None  # reverse.py's forward/backward split of it (False: none)


class jit:
    """Compile ``fun``: trace it once per input signature and replay the
    recorded NumPy program on later calls.

    ``static_argnums`` / ``static_argnames``: arguments that are part of the
    cache key by value (hashable), not inputs; Python numbers are inputs
    otherwise (read at every call; a Python ``if`` on one is a guard).
    ``max_traces``: traces of one signature before it runs uncompiled.
    ``cache_size``: signatures kept (least recently used dropped).
    ``strict``: raise :class:`JitError` instead of running uncompiled.
    ``fuse``: compile runs of elementwise operations into numba loops
    (``tapestry[numba]``): ``False`` (the default) never, so every replay
    gives the uncompiled call's bits; ``"auto"`` once a program has been
    replayed ``fuse_after`` times and only if that is faster (a cold
    function never pays numba's compile; from then on results may differ
    from earlier calls' in the last bits); ``True`` at the first call
    (``TAPESTRY_JIT_FUSE=0`` turns "auto" off).  Fused loops agree with
    NumPy within a few ulp.
    """

    def __init__(self, fun=None, *, static_argnums=(), static_argnames=(), max_traces=8,
                 cache_size=64, strict=False, fuse=False, fuse_after=20):
        if fun is None:  # @jit(static_argnums=...)
            self._partial = dict(static_argnums=static_argnums,
                                 static_argnames=static_argnames, max_traces=max_traces,
                                 cache_size=cache_size, strict=strict, fuse=fuse,
                                 fuse_after=fuse_after)
            self.fun = None
            return
        if not callable(fun):
            raise TypeError(f"tapestry.jit: expected a function, got {type(fun).__name__}.")
        self.fun = fun
        self.__tapestry_jit_fun__ = fun
        functools.update_wrapper(self, fun, updated=())
        if "__qualname__" not in self.__dict__:  # a partial, a callable object: named
            self.__qualname__ = getattr(fun, "__name__", None) or type(fun).__name__
        nums = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
        self.static_argnums = tuple(sorted(set(nums)))
        self.static_argnames = (static_argnames,) if isinstance(static_argnames, str) \
            else tuple(static_argnames)
        self.max_traces = max_traces
        self.cache_size = cache_size
        self.strict = strict
        if fuse not in ("auto", True, False):
            raise ValueError(f"tapestry.jit: fuse must be 'auto', True or False, got {fuse!r}.")
        if fuse is True and not fuse_available():
            raise ImportError("tapestry.jit(fuse=True) compiles loops with numba, which is "
                              "not installed: pip install 'tapestry[numba]'.")
        #: True: fuse at the first trace; "auto": once a program has run
        #: ``fuse_after`` times (if numba is there); False: never.
        self._fuse = fuse if fuse is not True else True
        if fuse == "auto" and (not fuse_available() or _NO_FUSE):
            self._fuse = False
        self.fuse_after = fuse_after
        self._fuse_option = fuse
        self._reverse = None  # the jitted pullback, for grad(jit(f)) (jit/reverse.py)
        self._reverse_env = None  # (objects, environment) of its last forward (reverse.py)
        #: f changed the argument containers of a call on traced values
        #: (reverse.py): such calls run inline from then on
        self._mutates_arguments = False
        self._splits = {}  # forward key -> split programs of the pullback (reverse.py)
        self._keep_trace = False  # keep each program's trace on it (reverse.py splits it)
        self._static = bool(self.static_argnums or self.static_argnames)
        self._binds = _binds(fun)  # a method when kept as a class attribute
        self._cache: OrderedDict = OrderedDict()
        self._lock = threading.Lock()
        self._misses: list = []
        self._eager_all = None  # reason the whole function runs uncompiled
        self._warned: set = set()
        self._calls = 0
        self.n_traces = 0

    # ``@jit(static_argnums=1)`` then the function
    def _finish(self, fun):
        return jit(fun, **self._partial)

    def __reduce__(self):
        """Pickled (for a process worker) as the function and the options: the
        programs, cache and counters are this process's and start afresh."""
        return (_rebuild_jit, (self.fun, self._options()))

    def _options(self):
        """The keyword arguments this jit was made with."""
        return dict(static_argnums=self.static_argnums, static_argnames=self.static_argnames,
                    max_traces=self.max_traces, cache_size=self.cache_size,
                    strict=self.strict, fuse=self._fuse_option, fuse_after=self.fuse_after)

    def _rewrap(self, transform):
        """``jit(transform(f))`` with this jit's options: ``vmap(jit(f))``
        compiles the batched function (one program for the batch) instead
        of running ``f`` uncompiled on batched values."""
        return _rebuild_jit(transform(self.fun), self._options())

    def __get__(self, obj, objtype=None):
        """A jitted method: ``self`` is a static argument (each instance its
        own programs; its attributes are guarded like a closure's)."""
        if obj is None or self.fun is None or not self._binds:
            return self  # (a ufunc or a partial as a class attribute: no self, as plain)
        return functools.partial(self.__call__, obj)

    def __repr__(self):
        return f"<tapestry.jit of {getattr(self.fun, '__qualname__', self.fun)!r}>"

    # --- calling -------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        if self.fun is None:
            if len(args) == 1 and callable(args[0]) and not kwargs:
                return self._finish(args[0])
            raise TypeError("tapestry.jit(...) without a function takes the function next.")
        self._calls += 1
        if self._eager_all is not None:
            return self.fun(*args, **kwargs)
        found = None if self._static else call_key(args, kwargs)
        if found is not None:  # plain containers of arrays and numbers: one walk
            key, inputs = found
            entry = self._cache.get(key)
            if entry is not None and entry.order is not None:
                inputs = [inputs[i] for i in entry.order]
        else:
            dyn, static_key = self._split_static(args, kwargs)
            leaves, treedef = tree_flatten(dyn)
            sig = _signature(leaves)
            if sig is _INLINE:  # inside another transformation (grad(jit(f)), ...)
                return call_on_traced(self, args, kwargs)
            skey, runtime, objects = sig
            key = (treedef, skey, static_key, aux_key(treedef))
            entry = self._cache.get(key)
            if entry is not None and entry.eager is None:
                inputs = [leaves[i] for i in runtime]
        if entry is not None:
            if entry.eager is not None:
                return self.fun(*args, **kwargs)
            for comp in entry.programs:
                unchanged = comp.unchanged
                if unchanged is not None and not unchanged():
                    why = comp.env.changed()
                    if why is not None:
                        self._miss(f"{why} since the trace")
                        self._drop(entry, comp)
                        continue
                try:
                    outs = comp.program.run(*inputs)
                except GuardFailed as g:
                    self._miss(_guard_message(comp.program.steps[g.step]))
                    continue
                except Exception as e:  # the trace did not raise here: trace again
                    self._miss(f"the replay raised {type(e).__name__}: {e}")
                    continue
                if entry.programs[0] is not comp:
                    self._promote(entry, comp)
                if comp.lowering is not None:
                    comp.replays += 1
                    if comp.replays >= self.fuse_after:
                        self._fuse_loops(comp, inputs)
                return comp.build(outs)
            if entry.traces >= self.max_traces:
                return self._give_up(entry, f"it was traced {entry.traces} times for one "
                                     f"signature; the last reason: {self._misses[-1]}",
                                     args, kwargs, result=_deferred_or_inline(self, args, kwargs))
        if found is not None:
            dyn, static_key = (args, kwargs), ()
            leaves, treedef = tree_flatten(dyn)
            skey, runtime, objects = _signature(leaves)
        if entry is None:
            order = input_order(args, kwargs, runtime) if found is not None else None
            entry = self._new_entry(key, objects, order,
                                    (treedef, skey, static_key, aux_key(treedef)))
        return self._trace(entry, args, kwargs, leaves, treedef, runtime, objects)

    #: The warning jit gives (jit/reverse.py warns through here).
    warning_class = JitWarning

    def _timing_contest(self, new, old, inputs):
        """Whether program ``new`` replays faster than ``old`` on ``inputs``
        (:func:`_faster`; jit/reverse.py asks through here)."""
        return _faster(new, old, inputs)

    @staticmethod
    def _signature_of(leaves):
        """:func:`_signature` of flattened arguments, ``None`` where one is
        traced (jit/reverse.py asks through here)."""
        sig = _signature(leaves)
        return None if sig is _INLINE else sig

    def _split_static(self, args, kwargs):
        """The dynamic arguments and the key of the static ones."""
        if not self.static_argnums and not self.static_argnames:
            return (args, kwargs), ()
        n = len(args)
        nums = [a % n if -n <= a < n else None for a in self.static_argnums]
        static = []
        for a, i in zip(self.static_argnums, nums):
            if i is None:
                continue
            static.append(("arg", i, _hashable(args[i], f"static argument {a}")))
        for name in self.static_argnames:
            if name in kwargs:
                static.append(("kw", name, _hashable(kwargs[name], f"static argument {name!r}")))
        idx = set(i for i in nums if i is not None)
        dyn_args = tuple(_STATIC if i in idx else a for i, a in enumerate(args))
        dyn_kwargs = {k: v for k, v in kwargs.items() if k not in self.static_argnames}
        return (dyn_args, dyn_kwargs), tuple(static)

    def _static_values(self, args, kwargs):
        """The static arguments' values: part of the key by their hash, and
        read by the function like a closure (a config object's attributes, a
        function's closure), so guarded like one."""
        if not self._static:
            return []
        n = len(args)
        got = [args[a] for a in self.static_argnums if -n <= a < n]
        return got + [kwargs[k] for k in self.static_argnames if k in kwargs]

    def _new_entry(self, key, objects, order, signature):
        with self._lock:
            if self._cache:
                self._miss(_signature_message(self._cache, signature))
            entry = self._cache[key] = _Entry(objects, order, signature)
            if len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return entry

    def _drop(self, entry, comp):
        with self._lock:
            if comp in entry.programs:
                entry.programs.remove(comp)

    def _promote(self, entry, comp):
        with self._lock:
            if comp in entry.programs:
                entry.programs.remove(comp)
                entry.programs.insert(0, comp)

    def _miss(self, why):
        msg = f"call {self._calls}: {why}"
        self._misses.append(msg)
        if len(self._misses) > 1000:
            del self._misses[:500]
        if _LOG:
            print(f"tapestry.jit({self.__qualname__}): traced again: {msg}", file=sys.stderr)

    # --- tracing ------------------------------------------------------------
    def _trace(self, *how):
        """Trace a call (:meth:`_traced_call`).  The random states it takes
        for a give-up (``_RAN_ONCE.tracing``) hold while it runs only, nested
        traces' inside it: a later give-up never puts back stale ones."""
        prev = getattr(_RAN_ONCE, "tracing", None)
        try:
            return self._traced_call(*how)
        finally:
            _RAN_ONCE.tracing = prev

    def _traced_call(self, entry, args, kwargs, leaves, treedef, runtime, objects):
        entry.traces += 1
        self.n_traces += 1
        try:
            env = environment(self.fun, objects + self._static_values(args, kwargs))
        except ReachesTraced:  # closes over a value of an enclosing transformation
            if _deferred_or_inline(self, args, kwargs) is DEFERRED:
                return DEFERRED
            return self.fun(*args, **kwargs)
        except Unstageable as e:
            return self._give_up(entry, str(e), args, kwargs,
                                 result=_deferred_or_inline(self, args, kwargs))
        rec = Recorder()
        # (np.geterr() or np.get_printoptions() read by the code: their state is
        # guarded, as where the function sets np.errstate or prints a value)
        rec.err_entered = "errors" in env.state_read
        rec.text_read = "print" in env.state_read
        rec.known = {i for a, *_ in env.arrays for i in (id(a), id(_root(a)))}
        rec.inline_sums = entry.inline_sums
        staged = list(leaves)
        for i in runtime:
            staged[i] = rec.input(leaves[i])
        if len(runtime) < len(leaves):
            _stage_repeats(staged, leaves, runtime)
        input_slots = [staged[i]._slot for i in runtime]
        sdyn = treedef.unflatten(staged)  # (dicts in the caller's key order)
        sargs, skwargs = sdyn
        sargs = self._restore_static(sargs, args)
        skwargs = {k: skwargs[k] if k in skwargs else kwargs[k] for k in kwargs}  # in order
        before = rng_states(env)
        # (what a caller differentiating this call puts back if the trace gives
        # up: reverse.call_on_traced)
        _RAN_ONCE.tracing = (self, raw_rng_states(env), env, rec)
        copies = _copied_containers((args, kwargs), sdyn, {})
        entropy = EntropyWatch()
        warned = WarnWatch("warn" in env.state_read)
        try:
            with entropy, warned:
                out = self.fun(*sargs, **skwargs)
                # (while the trace is open: a dict key made of a staged number
                # is hashed again here, a read of it)
                out_leaves, out_td = tree_flatten(out)
        except Unstageable as e:
            rec.open = False
            return self._give_up(entry, str(e), args, kwargs)
        except ReachesTraced:
            rec.open = False
            return self.fun(*args, **kwargs)
        except Exception as e:
            rec.open = False
            if rec.refused is not None:
                # it wrote into its arguments or environment on the real
                # values before it raised: running it again would do that twice
                _mirror(copies)
                self._give_up(entry, f"{rec.refused}; and it raised {type(e).__name__}",
                              args, kwargs, result=None)
                raise
            if env.changed() is not None or rng_changed(before, env) is not None or \
                    entropy.drew:
                # it changed its environment (or drew random numbers) before it
                # raised: running it again would do that twice. The trace ran
                # on the real values, so this is the plain call's error.
                self._give_up(entry, f"it changes what it reads while it runs and "
                              f"raised {type(e).__name__}", args, kwargs, result=None,
                              whole=True)
                raise
            # The function's own error, or one of the trace's: running it
            # uncompiled tells them apart (its own error raises again).
            result = self.fun(*args, **kwargs)
            return self._give_up(entry, f"tracing it raised {type(e).__name__}: {e}",
                                 args, kwargs, result=result)
        finally:
            rec.open = False
            if env.changed() is not None:  # staged values it stored must not escape
                env.unstage()
        if _wrote_conversion(rec):
            # the plain call wrote into the value itself (the caller's argument,
            # an intermediate it reads again): the trace wrote into a copy
            reason = ("it writes into np.asarray(x) of a staged value (x itself in the "
                      "plain call)")
            if rec.refused is not None or env.changed() is not None or \
                    rng_changed(before, env) is not None or entropy.drew:
                self._give_up(entry, reason, args, kwargs, result=None, whole=True)
                raise JitError(f"tapestry.jit({self.__qualname__}): {reason}, and it changed "
                               "its environment or arguments before: running it again would "
                               "do that twice. Write into x itself, or copy it "
                               "(np.array(x)), or call it without jit")
            return self._give_up(entry, reason, args, kwargs,
                                 result=self.fun(*args, **kwargs), whole=True)
        # a dict key made of a staged number ({k: x}): hashing it pinned it
        # (a guard), so the program rebuilds the dict with its value
        out_td = map_dict_keys(out_td, _holds_staged, _unstaged_key)
        staged_aux = aux_holding(out_td, _is_staged)
        if staged_aux is not None:  # this call's result holds values, not dead wrappers
            out_td = map_aux(out_td, _unstage)
        concrete = [_unstage(v) for v in out_leaves]
        handed_view = None
        if rec.handed:
            handed_view = _handed_outputs(rec, out_leaves, concrete)
            rec.handed = {}  # (the program keeps the recorder: not these arrays)
        odd = _odd_output(out_leaves)
        if staged_aux is not None and odd is None and rec.refused is None and \
                env.changed() is None and rng_changed(before, env) is None and not entropy.drew:
            # the program would rebuild the output with the trace's aux data
            where, cls = staged_aux
            return self._give_up(entry, f"it returns a {cls}{f' (output{where})' if where else ''} "
                                 "whose aux data (the static part its flatten function returns) "
                                 "holds a value computed from the arguments, which a replay "
                                 "would hand back as it was at the trace; make that value a "
                                 "child of the node instead", args, kwargs,
                                 result=out_td.unflatten(concrete))
        if odd is not None and rec.refused is None and env.changed() is None and \
                rng_changed(before, env) is None and not entropy.drew:
            # an object a replay would hand back shared between calls, with
            # staged values inside: the plain call makes a new one each time
            return self._give_up(entry, f"it returns a {odd} (not a pytree of arrays and "
                                 "numbers), which a replay would share between calls",
                                 args, kwargs)
        if rec.refused is not None:
            # the function finished on the concrete values: its result and its
            # effects are the plain call's; what it did to the copies of the
            # argument containers it was given is done to the caller's (running
            # it again would repeat its writes into the arrays)
            if _containers_changed(sdyn, treedef, staged):
                _mirror(copies)
            return self._give_up(entry, rec.refused, args, kwargs,
                                 result=out_td.unflatten(concrete))
        why = rng_changed(before, env) or ("the operating system's entropy (an unseeded "
                                           "generator made inside, np.random.default_rng())"
                                           if entropy.drew else None)
        if why is not None:
            return self._give_up(entry, f"it draws random numbers from {why}; a compiled "
                                 "replay would repeat the same draws. Pass the random "
                                 "values (or a seed) as arguments", args, kwargs,
                                 result=out_td.unflatten(concrete), whole=True)
        if warned.called:
            return self._give_up(entry, "it calls warnings.warn, whose warning a replay "
                                 "would not issue (it replays NumPy's calls, not the code "
                                 "around them)", args, kwargs,
                                 result=out_td.unflatten(concrete), whole=True)
        changed = env.changed()
        why = changed or ("NumPy's error state (np.seterr)" if np.geterr() != rec.err
                          else "NumPy's print options" if np.get_printoptions()
                          != rec.printopts else None)
        if changed is not None and why is changed and env.changed(added=True) is None \
                and not _containers_changed(sdyn, treedef, staged):
            # it only added attributes (self._W = ... the first time): this
            # call ran for real; the next one traces again, without adding them
            self._miss(f"{why} while it ran")
            return out_td.unflatten(concrete)
        if why is not None:
            return self._give_up(entry, f"it changes what it reads while it runs ({why}); "
                                 "a replay would skip that", args, kwargs,
                                 result=out_td.unflatten(concrete), whole=True)
        if _containers_changed(sdyn, treedef, staged):
            # the trace changed copies of the caller's lists and dicts: the
            # uncompiled run changes the caller's own, as the plain call does
            return self._give_up(entry, "it changes a list or dict it was passed (an "
                                 "append, an item assigned); a replay would skip that",
                                 args, kwargs, whole=True)
        stale = self._stale_steps(rec)
        if stale is not None:
            return self._give_up(entry, stale, args, kwargs, result=out_td.unflatten(concrete))
        if rec.end_checks and entry.retrace_inline(rec, self._miss):
            return out_td.unflatten(concrete)  # (this call ran for real: its result is right)
        rec.steps[:0] = state_guards(rec)
        walked = {id(_root(a)) for a, *_ in env.arrays}
        reached = {id(a) for a, *_ in env.arrays}
        outputs = []
        if handed_view is not None:
            return self._give_up(entry, handed_view, args, kwargs)
        whose = returned_container(out, copies, env)
        if whose is not None:
            return self._give_up(entry, f"it returns a list, dict or dataclass object of "
                                 f"{whose} (the same object in the plain call, which the "
                                 "caller may change); a replay would return a new one",
                                 args, kwargs)
        for v in out_leaves:
            if v.__class__ is Staged:
                if v._rec is not rec:
                    raise ReachesTraced("output")
                outputs.append(Slot(v._slot))
            elif v.__class__ in _TRACED:
                raise TypeError(
                    f"tapestry.jit: {self.__qualname__} returned a value traced by an "
                    "enclosing transformation that it read from a closure or a global; "
                    "pass that value to the jitted function as an argument.")
            elif isinstance(v, AxisSparse):  # a sparse gradient: rebuilt from its parts
                outputs.append(Rebuild(AxisSparse._trusted, (
                    v.axis, _slot_or_copy(v.indices, rec), _slot_or_copy(v.values, rec),
                    v.shape, v.coalesced)))
            elif v.__class__ is np.ndarray and id(_root(v)) in walked:
                # (a view of) an array of its environment: the plain call hands
                # out that memory, and a write into it changes the next call
                outputs.append(Rebuild(_Shared.get, (_Shared(v, id(v) not in reached),)))
            else:
                outputs.append(v)
        env.add_arrays(held_constants(rec.steps, outputs, {id(a) for a, *_ in env.arrays}),
                       "an array the program reads that something else holds")
        lowering = (rec, input_slots, outputs, [a for a, *_ in env.arrays],
                    _identifier(getattr(self.fun, "__name__", "f")))
        fuse_now = self._fuse is True
        try:
            program = lower(*lowering[:4], name=lowering[4], fuse=fuse_now)
        except Exception as e:  # the lowering's own failure: never the caller's
            if not fuse_now:
                return self._give_up(entry, f"lowering its trace failed ({type(e).__name__}: "
                                     f"{e})", args, kwargs, result=out_td.unflatten(concrete))
            self._warn_fuse(e)
            fuse_now = False
            program = lower(*lowering[:4], name=lowering[4], fuse=False)
        comp = _Compiled(program, env, out_td, None if fuse_now or not self._fuse else lowering,
                         (lowering, runtime) if self._keep_trace else None)
        fresh = fresh_aux_builder(out_td, env, treedef, objects)
        if fresh is not None:
            comp.build = fresh
        if fuse_now:
            self._compile_whole(comp, lowering, [leaves[i] for i in runtime])
        with self._lock:
            entry.programs.insert(0, comp)
            del entry.programs[4:]  # paths through the guards kept per signature
        return out_td.unflatten(concrete)

    @staticmethod
    def _stale_steps(rec):
        """Why the trace's steps cannot be given the values they read, or
        ``None``: a constant array the function wrote into after a step read
        it (``c = np.ones(2); y = x * c; c[0] = 5``) gets each step its value
        at that step (:meth:`Recorder.settle_constants`), unless something
        besides the program holds it, whose plain call sees every call's
        writes (a cached array) -- or the function returns it, or it is too
        large to keep a copy of; and a function or object of the user's that a
        step calls again must not change after it (:meth:`Recorder.stale_objects`)."""
        why = rec.stale_objects()
        if why is not None:
            return why
        for ref, large in rec.settle_constants():
            a = ref()
            if a is not None:
                held = ("it is too large to keep a copy of" if large else
                        "the array is held by something besides the program (a cache, "
                        "an object, its result)")
                return (f"it writes into an array {a.shape} {a.dtype} after a NumPy call "
                        f"read it, and {held}; a replay would skip the write")
        return None

    def _fuse_loops(self, comp, inputs):
        """Lower a hot program again with its elementwise runs compiled
        (numba), and keep whichever of the two replays faster on these
        inputs (replays are pure: running them again changes nothing).  A
        compile failure keeps the NumPy replay, with a warning."""
        lowering, comp.lowering = comp.lowering, None
        try:
            fused = lower(*lowering[:4], name=lowering[4], fuse=True)
            if fused.n_runs and _faster(fused.run, comp.program.run, inputs):
                comp.program = fused
        except Exception as e:  # numba could not compile a loop: the replay stays
            self._warn_fuse(e)
        self._compile_whole(comp, lowering, inputs)

    def _compile_whole(self, comp, lowering, inputs):
        """Compile the whole program into one numba function where every
        step allows it (:mod:`tapestry.jit.whole`), kept if it replays
        faster than the program it falls back to."""
        from .whole import compile_whole
        try:
            whole = compile_whole(lowering, comp.program)
            if whole.__class__ is str:
                comp.program.not_whole = whole  # (explain says why)
            elif _faster(whole.run, comp.program.run, inputs):
                comp.program = whole
            else:
                comp.program.not_whole = "the Python program replays faster"
        except Exception as e:  # numba could not compile it: the program stays
            comp.program.not_whole = f"compiling it failed ({type(e).__name__}: {e})"
            warnings.warn(f"tapestry.jit({self.__qualname__}): compiling the whole program "
                          f"into one function failed ({type(e).__name__}: {e}); the program "
                          "runs as it is", JitWarning, stacklevel=4)

    def _warn_fuse(self, e):
        msg = (f"tapestry.jit({self.__qualname__}): fusing elementwise loops failed "
               f"({type(e).__name__}: {e}); the NumPy replay is used")
        if self.strict:
            raise JitError(msg) from e
        warnings.warn(msg, JitWarning, stacklevel=4)

    def _restore_static(self, sargs, args):
        if not self.static_argnums:
            return sargs
        return tuple(args[i] if a is _STATIC else a for i, a in enumerate(sargs))

    def _give_up(self, entry, reason, args, kwargs, result=_INLINE, whole=False):
        """Run uncompiled from now on (this signature, or the whole function),
        with one warning; ``strict`` raises instead."""
        name = self.__qualname__
        msg = f"tapestry.jit({name}) runs uncompiled: {reason}."
        # (f ran for real, once or more: a caller differentiating this call must
        # not run it once more as if nothing changed -- reverse.call_on_traced)
        tracing = getattr(_RAN_ONCE, "tracing", None)
        _RAN_ONCE.last = (self, *tracing[1:]) if tracing is not None and tracing[0] is self \
            else (self, None, None, None)
        if self.strict:
            raise JitError(msg)
        if whole:
            self._eager_all = reason
        else:
            entry.eager = reason
        self._miss(f"runs uncompiled: {reason}")
        if reason not in self._warned:
            self._warned.add(reason)
            warnings.warn(msg, JitWarning, stacklevel=3)
        if result is _INLINE:
            return self.fun(*args, **kwargs)
        return result

    # --- diagnostics --------------------------------------------------------
    def explain_cache_misses(self):
        """Why each trace after the first happened, one line per trace (the
        environment switch ``TAPESTRY_JIT_LOG=1`` prints them as they happen)."""
        return list(self._misses) + [f"{m} (parallel_sum's per-item value_and_grad)"
                                     for d in self._derived() for m in d._misses]

    def _derived(self):
        """The jits made from this one for ``parallel_sum`` over items
        (:mod:`tapestry.jit.items`): their work is this function's."""
        return list(self.__dict__.get("_items_value_and_grad", {}).values())

    def explain(self, *args, **kwargs):
        """The program for these arguments (traced now if not cached): its
        guards, its environment and its source.  Returns the text."""
        self(*args, **kwargs)
        key = self._key(args, kwargs)
        if key is None:
            return "called inside another transformation: runs inline, not compiled"
        entry = self._cache.get(key)
        if self._eager_all is not None or entry is None or entry.eager is not None:
            why = self._eager_all or (entry.eager if entry is not None else "not cached")
            return f"runs uncompiled: {why}"
        comp = entry.programs[0]
        p = comp.program
        lines = [f"tapestry.jit({self.__qualname__}): {p.n_calls} calls "
                 f"({p.n_runs} of them fused loops{'; compiled whole' if p.whole else ''}), "
                 f"{p.n_guards} guards, {len(comp.env)} environment checks, "
                 f"{entry.traces} trace(s) for this signature"]
        if p.not_whole:
            lines.append(f"not compiled whole: {p.not_whole}")
        guards = [s for s in p.steps if s.kind not in ("call", "item")]
        if guards:
            lines.append("guards (Python read these values; a change traces again):")
            for s in guards:
                lines.append(f"  {_guard_site(s)}: {s.kind} {_shown(s.value)}")
        env = comp.env.describe()
        if env:
            lines.append("environment (checked before every replay):")
            lines += [f"  {d}" for d in env]
        lines.append("program:")
        lines.append(p.source)
        text = "\n".join(lines)
        print(text)
        return text

    def _key(self, args, kwargs):
        """The cache key of a call (``None``: traced arguments, run inline)."""
        found = None if self._static else call_key(args, kwargs)
        if found is not None:
            key = found[0]
        else:
            dyn, static_key = self._split_static(args, kwargs)
            leaves, treedef = tree_flatten(dyn)
            sig = _signature(leaves)
            if sig is _INLINE:
                return None
            key = (treedef, sig[0], static_key, aux_key(treedef))
        return key

    def _compiled_for(self, args, kwargs):
        """The programs cached for the signature of this call (a list, most
        recently used first; empty where none is, or it runs uncompiled)."""
        key = self._key(args, kwargs)
        entry = None if key is None or self._eager_all is not None else self._cache.get(key)
        if entry is None or entry.eager is not None:
            return []
        return list(entry.programs)

    def cache_info(self):
        """``{"signatures", "programs", "traces", "calls", "numpy_calls",
        "fused_loops", "whole_programs"}`` so far (``numpy_calls``: the calls
        of the largest program, a fused loop counting one; ``whole_programs``:
        programs compiled into one numba function, :mod:`tapestry.jit.whole`)."""
        derived = self._derived()
        caches = [self._cache] + [d._cache for d in derived]
        progs = [c.program for cache in caches for e in cache.values() for c in e.programs]
        return {"signatures": sum(map(len, caches)), "programs": len(progs),
                "traces": self.n_traces + sum(d.n_traces for d in derived),
                "calls": self._calls + sum(d._calls for d in derived),
                "numpy_calls": max((p.n_calls for p in progs), default=0),
                "fused_loops": sum(p.n_runs for p in progs),
                "whole_programs": sum(p.whole for p in progs)}

    def clear_cache(self):
        for d in self._derived():
            d.clear_cache()
        with self._lock:
            self._cache.clear()
            self._splits = {}
            self._eager_all = None


def _binds(fun):
    """Whether ``fun`` as a class attribute becomes a method (a Python
    function does; a ufunc, a builtin, a ``functools.partial`` or a
    ``staticmethod`` does not get the instance)."""
    return hasattr(type(fun), "__get__") and not isinstance(fun, (staticmethod, type))


def _faster(new, old, inputs, repeats=5):
    """Whether ``new(*inputs)`` runs faster than ``old(*inputs)`` (best of
    ``repeats`` each, interleaved, after one warm-up call of each).  The
    runs are extra, not the call's: their warnings (divide by zero) are off."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _race(new, old, inputs, repeats)


def _race(new, old, inputs, repeats):
    import time
    new(*inputs)
    old(*inputs)
    best = [float("inf"), float("inf")]
    for _ in range(repeats):
        for k, f in enumerate((new, old)):
            t0 = time.perf_counter()
            f(*inputs)
            best[k] = min(best[k], time.perf_counter() - t0)
    return best[0] < best[1]


def _rebuild_jit(fun, options):
    return jit(fun, **options)


class _StaticMarker:
    __slots__ = ()

    def __repr__(self):
        return "<static>"


_STATIC = _StaticMarker()


def _hashable(x, what):
    try:
        hash(x)
    except TypeError:
        raise TypeError(f"tapestry.jit: {what} must be hashable (it is part of the cache "
                        f"key), got {type(x).__name__}. Pass arrays as ordinary arguments, "
                        "or a tuple instead of a list.") from None
    return typed(x)


def _handed_outputs(rec, out_leaves, concrete):
    """Put back the arrays the plain call returns where the function
    returns what NumPy's conversion of a staged value handed out
    (``return np.asarray(x)``): ``x`` itself (the argument, writable,
    the same object), or a new writable array where the conversion changed
    the dtype.  Changes ``out_leaves`` and ``concrete`` in place; returns
    the reason to run uncompiled where an output is a view of such an
    array (a view of the argument in the plain call), else ``None``."""
    for k, v in enumerate(out_leaves):
        if v.__class__ is not np.ndarray:
            continue
        got = rec.handed.get(id(v))
        if got is not None and got[0] is v:
            if got[1] is not None and v.strides != got[1]._value.strides:
                return ("it returns np.asarray(x) of a staged value laid out in memory "
                        "as jit could not copy it (a view spanning much more memory than "
                        "it holds), where the plain call returns x itself or a copy")
            if got[1] is not None:
                out_leaves[k] = got[1]
                concrete[k] = got[1]._value
            else:
                concrete[k] = v.copy(order="K")  # (laid out as NumPy made it)
        elif id(_root(v)) in rec.handed or _views_handed(v, rec.handed):
            return ("it returns a view of np.asarray(x) of a staged value (a view of x "
                    "itself in the plain call), which a replay would hand out as a copy")
    return None


def _wrote_conversion(rec):
    """Whether the trace wrote into an array NumPy's conversion of a staged
    value handed out writable (see ``Recorder.converted``)."""
    found = any(snap is None or not same_bits(a, snap) for a, snap in rec.converted)
    rec.converted = []
    return found


def _views_handed(v, handed):
    """Whether ``v`` views the memory of an array a conversion handed out
    through an object that is not an array (``as_strided``'s interface
    object, ``np.frombuffer``'s buffer), where its chain of bases stops."""
    return not isinstance(_root(v).base, type(None)) and any(
        np.may_share_memory(v, a) for a, _ in handed.values())


def _stage_repeats(staged, leaves, runtime):
    """Give an array passed twice (``f(x, x)``) the staged value of its
    first place in its other places too, as :func:`_signature` keys it:
    the function sees one object there (``x is y``), as the plain call does."""
    first = {id(leaves[i]): staged[i] for i in runtime if leaves[i].__class__ is np.ndarray}
    for i, x in enumerate(leaves):
        if x.__class__ is np.ndarray and staged[i] is x and id(x) in first:
            staged[i] = first[id(x)]


def _odd_output(leaves):
    """The type name of the first output leaf that is not a staged value nor
    an immutable plain value (an object of the user's, a function), or ``None``."""
    for v in leaves:
        if v.__class__ is not Staged and not isinstance(v, _PLAIN_OUTPUTS) \
                and v.__class__ is not AxisSparse:  # (rebuilt on every call)
            return type(v).__name__
    return None


class _Shared:
    """An array of the function's environment that it returns (``return W``):
    handed out as it is, as the plain call does, not copied (its
    environment guard compares it with its value at the trace)."""

    __slots__ = ("a", "view")

    def __init__(self, a, view):
        self.a, self.view = a, view  # view: made by the function (W[0]), not W itself

    def get(self):
        return self.a.view() if self.view else self.a  # (a new view per call, as plain)


def _is_staged(v):
    return v.__class__ is Staged


def _holds_staged(key):
    """Whether a dict key is or holds (in a tuple or frozenset) a staged value."""
    c = key.__class__
    if c is Staged:
        return True
    return isinstance(key, (tuple, frozenset)) and any(_holds_staged(k) for k in key)


def _unstaged_key(key):
    """A dict key with the values in place of the staged values inside it."""
    c = key.__class__
    if c is Staged:
        return key._value
    if isinstance(key, (tuple, frozenset)):
        items = [_unstaged_key(k) for k in key]
        return c(*items) if hasattr(key, "_fields") else c(items)
    return key


def _unstage(v):
    if v.__class__ is Staged:
        return v._value
    if isinstance(v, AxisSparse) and v.staged():
        return AxisSparse._trusted(v.axis, _unstage(v.indices), _unstage(v.values),
                                   v.shape, v.coalesced)
    return v


def _slot_or_copy(x, rec):
    """A part of a returned object: its slot if staged by this trace, else
    the constant itself (copied by the program on every call)."""
    if x.__class__ is Staged:
        if x._rec is not rec:
            raise ReachesTraced("output")
        return Slot(x._slot)
    return x


def _identifier(name):
    name = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    return name if name and not name[0].isdigit() else "f_" + name


def _guard_site(step):
    if step.site is None and step.kind == "state":
        return f"np.{step.fn.__name__}()"
    f, line, fn = step.site or ("?", 0, "?")
    return f"{os.path.basename(f)}:{line} in {fn}"


def _shown(v):
    if isinstance(v, tuple) and len(v) == 2 and isinstance(v[1], np.dtype):
        return f"shape {v[0]} dtype {v[1]}"
    if isinstance(v, type):
        return f"raises {v.__name__}"
    if isinstance(v, np.ndarray):
        return f"the value {np.array2string(v, threshold=6)}"
    return repr(v)


_KIND_WORDS = {"bool": "a truth value (if / while / bool())", "int": "int()",
               "index": "an index (range(), a slice bound, __index__)",
               "float": "float()", "pin": "the value itself (np.asarray, .item(), tolist)",
               "shape": "a shape that depends on the data", "raises": "an exception",
               "state": "NumPy's error state (np.errstate) or print options (text of a "
                        "value)"}


def _guard_message(step):
    return (f"the guard at {_guard_site(step)} failed: Python read "
            f"{_KIND_WORDS.get(step.kind, step.kind)}, which was {_shown(step.value)} "
            "at trace time and differs now")


def _signature_message(cache, signature):
    """What differs from the most recent signature (``(treedef, leaf key,
    static key, aux key)`` each)."""
    treedef, skey, static_key, order = signature
    last_td, last_key, _, last_order = next(reversed(cache.values())).signature
    if last_td != treedef:
        return f"a new argument structure {treedef!r} (was {last_td!r})"
    for i, (a, b) in enumerate(zip(last_key, skey)):
        if a != b:
            return f"a new signature: leaf {i} was {_key_word(a)}, now {_key_word(b)}"
    if last_order != order:
        return "a new key order, or new key types, of a dict argument"
    return "a new value of a static argument"


def _key_word(k):
    if isinstance(k, tuple) and len(k) == 2 and isinstance(k[1], np.dtype):
        return f"an array {k[0]} {k[1]}"
    if isinstance(k, type):
        return f"a Python {k.__name__}"
    return repr(k)
