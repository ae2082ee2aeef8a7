"""What a compiled function reads besides its arguments, and the guards on it.

A replay is valid only while everything the traced function read is as it
was: its closure cells, the globals its code names, the attributes of the
objects it reaches (``self.W``), default arguments, containers.  Before each
trace :func:`environment` walks all of that (the code of every reachable
user function, its nested code, the helpers it calls) and returns an
:class:`Environment`: identity checks on every binding (a rebound global,
a reassigned attribute, a replaced list item) and a bitwise comparison of
every reachable array against its value at trace time (``W[:] = 0``, ``W
-= lr * g``).  A replay runs only when every check passes; otherwise the
function is traced again.  Library code (NumPy, SciPy, tapestry) is trusted
not to change between calls and is not walked, except the closures of
tapestry's own wrappers (``tp.grad(f)`` holds ``f``).

Random number generators reachable from the function, NumPy's global
generator and Python's ``random`` are listed too: if a trace changes their
state, the function draws random numbers, which a replay would repeat.
"""
from __future__ import annotations

import collections
import collections.abc
import contextvars
import ctypes
import decimal
import functools
import gc
import operator
import os
import random
import sys
import threading
import types
import warnings
import weakref

import numpy as np

from ..core.batched import Batched, Unbatched
from ..core.staged import SNAPSHOT_BYTES, Digest, Staged, Unstageable, _same_bits, _snapshot
from ..core.var import Var

#: Modules whose functions and data are trusted not to change between calls.
_LIBRARIES = ("numpy", "scipy", "opt_einsum", "builtins", "math", "cmath", "functools",
              "operator", "collections", "typing", "abc", "itertools", "numbers",
              "random", "warnings", "contextlib", "dataclasses", "enum", "re", "os",
              "sys", "time", "threading", "copy", "types", "weakref", "inspect",
              "logging", "numba", "matplotlib", "torch", "jax", "autograd", "pandas")
#: Immutable leaves: an identity check of their binding is all they need.
_ATOMS = (int, float, complex, bool, str, bytes, type(None), type(Ellipsis), np.generic,
          np.dtype, type, types.ModuleType, types.BuiltinFunctionType, np.ufunc, slice,
          range, type(NotImplemented))
#: Most values the walk visits before it gives up (a function reaching a
#: large object graph is run uncompiled rather than guarded partially).
MAX_VALUES = 20_000
#: Names in the code that read attributes by a computed name: every
#: attribute of the objects reached is then guarded, not only those named.
_DYNAMIC = frozenset({"getattr", "vars", "attrgetter", "__dict__", "asdict", "astuple"})
#: Names in the code that read the process's environment variables.
_ENVIRON_NAMES = frozenset({"environ", "getenv", "environb", "getenvb"})
#: Names in the code that compute with ``decimal``, whose results follow the
#: calling thread's decimal context (precision, rounding, traps).
_DECIMAL_NAMES = frozenset({"decimal", "Decimal", "getcontext", "localcontext"})
#: Names in the code that read globals by a computed name.
_DYNAMIC_GLOBALS = frozenset({"globals", "eval", "exec"})
#: Names in the code with which it may read an attribute whose name is a
#: string constant (``hasattr(self, "W")``; ``getattr`` and the others of
#: ``_DYNAMIC`` guard every attribute): those string constants are then
#: guarded as attribute names.
_ATTRS_BY_STRING = frozenset({"hasattr", "setattr", "delattr", "__getattribute__",
                              "getattr_static"})
#: Names in the code with which it may read a global whose name is a
#: string constant (``getattr(sys.modules[__name__], "W")``): those string
#: constants are then guarded as globals.
_GLOBALS_BY_STRING = _DYNAMIC | _DYNAMIC_GLOBALS | frozenset(
    {"f_globals", "__globals__", "modules", "import_module"})
#: Names in the code with which it imports a module named by a string
#: constant (``__import__("cfg")``): those strings then name modules too.
_IMPORTS_BY_STRING = frozenset({"__import__", "import_module"})
#: Most checks :meth:`Environment.compiled_check` compiles into one function
#: (twice as fast as the loop of ``changed``; compiling 256 takes ~3 ms).
COMPILED_CHECKS = 256
_RNG_TYPES = (np.random.Generator, np.random.RandomState, np.random.BitGenerator,
              np.random.SeedSequence, random.Random)


class ReachesTraced(Exception):
    """The function closes over a value traced by an enclosing transform
    (a ``Var``, a ``Batched``, another jit's staged value): it must run
    inline in that transform, not be compiled on its own."""


def _library(module_name):
    root = (module_name or "").partition(".")[0]
    return root in _LIBRARIES or root == "tapestry"


def _trusted(v):
    """Whether ``v``, found in a library module, is the library's own (a
    function or object it defines, a ufunc, a number), which is not walked."""
    if isinstance(v, _ATOMS):
        return not isinstance(v, types.ModuleType)
    owner = getattr(v, "__module__", None)
    if not isinstance(owner, str):
        owner = getattr(type(v), "__module__", None)
    return _library(owner)


def _code_names(code, names, seen):
    if code in seen:
        return
    seen.add(code)
    names.update(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            _code_names(c, names, seen)
        elif isinstance(c, str) and c.isidentifier():
            names.add("'" + c)  # getattr(self, "W"): an attribute name, marked


class Environment:
    """Guards on what a function reads besides its arguments."""

    def __init__(self):
        self.bindings: list = []   # (kind, holder, key, obj, label)
        self.arrays: list = []     # (array, snapshot, compare, label)
        self.rngs: list = []       # generator objects reached
        self.functions: list = []  # user functions reached (for explain)
        self.keys: dict = {}       # id(namespace): its names at the walk (restore)
        #: NumPy state the code reads by name (np.geterr(), np.get_printoptions()):
        #: guarded by the trace as where the function sets or prints it
        self.state_read: set = set()

    # --- checks ---------------------------------------------------------
    def changed(self, added=False):
        """``None`` if every binding and array is as at trace time, else a
        sentence saying what changed.  ``added``: attributes added to an
        object (``self._W = ...`` the first time) do not count."""
        for kind, holder, key, obj, label in self.bindings:
            if kind == "cell":
                try:
                    cur = holder.cell_contents
                except ValueError:
                    return f"{label} was deleted"
            elif kind == "dict":
                cur = holder.get(key, _MISSING)
            elif kind == "attr":
                cur = getattr(holder, key, _MISSING)
            elif kind == "eq":  # a value read fresh each time: equal and of one type
                cur = getattr(holder, key, _MISSING)
                if type(cur) is not type(obj) or not _equal(cur, obj):
                    return f"{label} was rebound"
                continue
            elif kind == "ref":
                cur = holder()
            elif kind == "bytes":
                if _buffer(holder) != obj:
                    return f"{label} was modified in place"
                continue
            elif kind == "copy":  # a snapshot of a mapping (os.environ)
                if holder != obj:
                    return f"{label} changed"
                continue
            elif kind == "cache":  # (a result cached the first time: added)
                if not _same_cache(holder, obj, added):
                    return f"{label} changed (a result cached or dropped)"
                continue
            elif kind == "len" or kind == "attrs":
                if kind == "attrs" and added and len(holder) > obj:
                    continue
                if len(holder) != obj:
                    return f"{label} changed length ({obj} -> {len(holder)})"
                continue
            else:  # "seq": a list's items, by identity
                if len(holder) != len(obj) or any(a is not b for a, b in zip(holder, obj)):
                    return f"{label} was modified"
                continue
            if cur is not obj:
                return f"{label} was rebound"
        for a, snap, same, label in self.arrays:
            if not same(a, snap):
                return f"{label} was modified in place"
        return None

    def __len__(self):
        return len(self.bindings) + len(self.arrays)

    def restore(self):
        """Put back what the function changed since the walk (``None``), or
        name the first value that cannot be put back.  A differentiated
        first call whose trace ran the function for real runs it once more
        on the tape (:func:`tapestry.jit.reverse._ran_for_real`): that run
        must start from the state the first one saw, or it differentiates
        another function (a counter it reads, stepped twice) even where its
        value happens to be the same."""
        for kind, holder, key, obj, label in self.bindings:
            why = _restore_binding(kind, holder, key, obj, label)
            if why is not None:
                return why
        for kind, holder, key, obj, label in self.bindings:
            if kind in ("len", "attrs") and len(holder) != obj:
                # (names added since the walk: its names were kept)
                known = self.keys.get(id(holder), ())
                for k in [k for k in holder if k not in known]:
                    del holder[k]
                if len(holder) != obj:
                    return label
        for a, snap, same, label in self.arrays:
            if not same(a, snap):
                if not a.flags.writeable:
                    return label
                np.copyto(a, snap, casting="unsafe")
        return self.changed()

    def compiled_check(self):
        """A function of no arguments that is True when every binding and
        array is as at trace time: the checks :meth:`changed` makes, as one
        straight-line function (a replay runs it before every call).  False
        means something changed or a check raised: :meth:`changed` says
        which, or finds that nothing did.  Make it once the environment is
        complete (after :meth:`add_arrays`).  Past ``COMPILED_CHECKS``
        checks, compiling costs more than it saves: ``changed`` itself."""
        if len(self) > COMPILED_CHECKS:
            return self._unchanged
        return _compile_check(self.bindings, self.arrays)

    def _unchanged(self):
        return self.changed() is None

    def unstage(self):
        """Replace the staged values a trace left in what the function reads
        (``self.last = h``, ``losses.append(loss)``, ``cache[k] = v``) by
        their values: the trace ran the function for real, so its effects
        stay, but a staged value would outlive its trace."""
        seen: set = set()
        for kind, holder, key, obj, label in self.bindings:
            if kind == "cell":
                try:
                    v = holder.cell_contents
                except ValueError:
                    continue
                new = unstaged(v, seen)
                if new is not v:
                    holder.cell_contents = new
            elif kind == "dict" and key in holder:
                v = holder[key]
                new = unstaged(v, seen)
                if new is not v:
                    holder[key] = new
            elif kind == "attr":
                v = getattr(holder, key, _MISSING)
                if v is not _MISSING and unstaged(v, seen) is not v:
                    setattr(holder, key, unstaged(v, seen))
            elif kind in ("seq", "len", "attrs"):
                unstaged(holder, seen)
            elif kind == "cache":
                # a staged number passed to (or returned by) a cached helper:
                # its entry cannot be rewritten, and would poison every later
                # call, plain ones too -- the cache is emptied
                if any(unstaged(o, seen) is not o for o in holder.objects()):
                    holder.f.cache_clear()

    def add_arrays(self, arrays, label):
        """Guard ``arrays`` too (compared bitwise before every replay)."""
        for a in arrays:
            self.arrays.append((a, a.copy(), _comparer(a), label))

    def describe(self):
        out = [label for *_, label in self.bindings if not label.startswith("len")]
        out += [f"{label}: array {a.shape} {a.dtype}, compared bitwise"
                for a, _, _, label in self.arrays]
        return out


_MISSING = object()


def _restore_binding(kind, holder, key, obj, label):
    """Put back one binding of :meth:`Environment.restore` (``None``), or
    say which cannot be put back."""
    try:
        if kind == "cell":
            if holder.cell_contents is not obj:
                holder.cell_contents = obj
        elif kind == "dict":
            if holder.get(key, _MISSING) is not obj:
                if obj is _MISSING:
                    del holder[key]
                else:
                    holder[key] = obj
        elif kind == "attr" or kind == "eq":
            cur = getattr(holder, key, _MISSING)
            if cur is not obj and not (kind == "eq" and _same_value(cur, obj)):
                if obj is _MISSING:
                    delattr(holder, key)
                else:
                    setattr(holder, key, obj)
        elif kind == "seq":
            if len(holder) != len(obj) or any(a is not b for a, b in zip(holder, obj)):
                if isinstance(holder, set):
                    holder.clear()
                    holder.update(obj)
                elif isinstance(holder, collections.deque):
                    holder.clear()
                    holder.extend(obj)
                else:
                    holder[:] = bytes(obj) if isinstance(holder, bytearray) else obj
        elif kind == "bytes":
            if _buffer(holder) != obj:
                memoryview(holder).cast("B")[:] = obj
        elif kind == "ref":
            if holder() is not obj:
                return label
        elif kind == "copy":
            if holder != obj:
                return label
    except Exception:  # (a class's namespace, a read-only buffer: cannot be set)
        return label
    return None


class _ContextRead:
    """A ``ContextVar``'s value in the current context, as an attribute (an
    ``"eq"`` binding compares it at every call; it cannot be set back)."""

    __slots__ = ("var",)

    def __init__(self, var):
        self.var = var

    @property
    def value(self):
        return self.var.get(_MISSING)


class _DecimalContext:
    """The settings of the calling thread's ``decimal`` context, as an
    attribute (an ``"eq"`` binding compares them at every call): the trace
    pinned the numbers it rounded (``float(Decimal(1) / 3)``)."""

    __slots__ = ()

    @property
    def value(self):
        c = decimal.getcontext()
        return (c.prec, c.rounding, c.Emin, c.Emax, c.capitals, c.clamp,
                tuple(sorted(k.__name__ for k, on in c.traps.items() if on)))


def _same_items(holder, items):
    return len(holder) == len(items) and all(a is b for a, b in zip(holder, items))


def _same_value(cur, obj):
    return type(cur) is type(obj) and _equal(cur, obj)


#: The C type of ``functools.lru_cache``'s wrappers (``None`` where the
#: pure-Python fallback is in use).
_LRU_WRAPPER = getattr(functools, "_lru_cache_wrapper", None)
if not isinstance(_LRU_WRAPPER, type):
    _LRU_WRAPPER = None


class _CachedResults:
    """The results a ``functools.lru_cache`` wrapper holds, as a set of
    identities (a ``"cache"`` binding compares them at every call).  The C
    wrapper offers no way to read them but the garbage collector's view of
    what it references: the cache dict's values (an unbounded cache), the
    keys and results of its links (a bounded one).  A helper's cached result
    is state like a memo dict's: the function may write into it
    (``buf(3)[0] += 1``), and a replay would skip that."""

    __slots__ = ("f", "kept")

    def __init__(self, f):
        self.f = f
        self.kept = ()  # the results at the walk (alive: their ids stay theirs)

    def objects(self):
        f = self.f
        skip = (id(_get(f, "__dict__")), id(_get(f, "__wrapped__")))
        out = []
        for r in gc.get_referents(f):
            if id(r) in skip or isinstance(r, type):
                continue
            if r.__class__ is dict:  # the cache (an unbounded one holds the results)
                for k, v in list(r.items()):
                    out.append(k)
                    if type(v).__name__ != "_lru_list_elem":
                        out.append(v)
            else:
                out.append(r)
        return out

    def ids(self):
        return frozenset(map(id, self.objects()))


def _same_cache(holder, ids, added=False):
    now = holder.ids()
    return now == ids or (added and now > ids)


def _compile_check(bindings, arrays):
    """The source of :meth:`Environment.compiled_check`'s function, compiled:
    one test per binding and array, the objects bound as names."""
    ns = {"M": _MISSING, "len": len, "getattr": getattr, "_buffer": _buffer,
          "_same_items": _same_items, "_same_value": _same_value,
          "_same_cache": _same_cache}
    tests = []
    for i, (kind, holder, key, obj, _) in enumerate(bindings):
        h, k, o = f"h{i}", f"k{i}", f"o{i}"
        ns[h], ns[k], ns[o] = holder, key, obj
        if kind == "cell":  # (a deleted cell raises: changed() names it)
            tests.append(f"{h}.cell_contents is {o}")
        elif kind == "dict":
            tests.append(f"{h}.get({k}, M) is {o}")
        elif kind == "attr":
            tests.append(f"getattr({h}, {k}, M) is {o}")
        elif kind == "eq":
            tests.append(f"_same_value(getattr({h}, {k}, M), {o})")
        elif kind == "ref":
            tests.append(f"{h}() is {o}")
        elif kind == "bytes":
            tests.append(f"_buffer({h}) == {o}")
        elif kind == "copy":
            tests.append(f"{h} == {o}")
        elif kind == "len" or kind == "attrs":
            tests.append(f"len({h}) == {o}")
        elif kind == "seq":
            tests.append(f"_same_items({h}, {o})")
        elif kind == "cache":
            tests.append(f"_same_cache({h}, {o})")
        else:  # a kind this does not know: changed() decides at every call
            tests.append("False")
    for i, (a, snap, same, _) in enumerate(arrays):
        ns[f"a{i}"], ns[f"s{i}"], ns[f"same{i}"] = a, snap, same
        tests.append(f"same{i}(a{i}, s{i})")
    body = "".join(f"        if not ({t}):\n            return False\n" for t in tests)
    src = ("def unchanged():\n    try:\n" + (body or "        pass\n")
           + "    except Exception:  # changed() says what\n        return False\n"
           + "    return True\n")
    exec(compile(src, "<tapestry.jit environment check>", "exec"), ns)
    return ns["unchanged"]


def unstaged(x, seen):
    """``x`` with the staged values inside it (lists, dicts and sets changed
    in place, tuples rebuilt, user objects' attributes) replaced by their
    values; ``x`` itself unless it is staged or a tuple holding one."""
    c = x.__class__
    if c is Staged:
        return x._value
    if isinstance(x, _ATOMS) or id(x) in seen or isinstance(x, np.ndarray):
        return x
    seen.add(id(x))
    if isinstance(x, tuple):
        items = [unstaged(v, seen) for v in x]
        if all(a is b for a, b in zip(items, x)):
            return x
        return c(*items) if hasattr(x, "_fields") else c(items)
    if isinstance(x, (list, collections.deque)):
        for k, v in enumerate(x):
            new = unstaged(v, seen)
            if new is not v:
                x[k] = new
    elif isinstance(x, dict):
        for k, v in list(x.items()):
            new = unstaged(v, seen)
            if new is not v:
                x[k] = new
    elif isinstance(x, set):
        items = [unstaged(v, seen) for v in x]
        if any(a is not b for a, b in zip(items, x)):
            x.clear()
            x.update(items)
    elif not isinstance(x, (types.FunctionType, types.MethodType, functools.partial)) and \
            not _library(type(x).__module__):
        d = _get(x, "__dict__")
        if isinstance(d, dict):
            unstaged(d, seen)
    return x


def _get(x, name, default=None):
    """``getattr(x, name, default)``, with any error counting as missing: a
    user's ``__getattr__`` may raise ``KeyError`` (an attribute dict, a
    config object) for the names jit asks about and the function never reads."""
    try:
        return getattr(x, name, default)
    except Exception:  # noqa: BLE001
        return default


def _attribute_hook(cls):
    """The user's ``__getattr__`` / ``__getattribute__`` of ``cls``, or ``None``."""
    for klass in cls.__mro__:
        if klass is object or _library(klass.__module__):
            continue
        for n in ("__getattribute__", "__getattr__"):
            f = klass.__dict__.get(n)
            if isinstance(f, types.FunctionType):
                return f
    return None


#: Special methods that run when an object is made or copied, not when the
#: function reads it.
_NOT_READS = frozenset({"__init__", "__new__", "__del__", "__init_subclass__",
                        "__set_name__", "__class_getitem__", "__reduce__", "__reduce_ex__",
                        "__getstate__", "__setstate__", "__copy__", "__deepcopy__",
                        "__getattr__", "__getattribute__", "__setattr__", "__delattr__"})


def _special_methods(cls):
    """``(name, function)`` of the special methods (``__getitem__``,
    ``__iter__``, ``__array__``, ``__mul__``, ...) the user's classes in
    ``cls``'s MRO define: Python and NumPy call them implicitly."""
    found = {}
    for klass in cls.__mro__:
        if klass is object or _library(klass.__module__):
            continue
        for n, f in klass.__dict__.items():
            if n[:2] == "__" and n[-2:] == "__" and n not in _NOT_READS and n not in found \
                    and isinstance(f, types.FunctionType):
                found[n] = f
    return list(found.items())


def _buffer(x):
    """The bytes of an object with a writable buffer (``array.array``), or ``None``."""
    if isinstance(x, (bytes, str, np.generic)):
        return None
    try:
        m = memoryview(x)
    except TypeError:
        return None
    return None if m.readonly else m.tobytes()


def _equal(a, b):
    try:
        return bool(a == b)
    except Exception:  # an array, or a comparison that refuses: not the same
        return a is b


def environment(fn, extra=(), copies=True):
    """Walk what ``fn`` reads (and the static objects ``extra``); raises
    :class:`ReachesTraced` if a traced value is among it and
    :class:`Unstageable` if it is too large to guard.  ``copies=False``:
    arrays are watched through the bindings that hold them only (rebinding
    is seen, writes in place are not)."""
    names: set = set()
    # The names the code reads decide which attributes count; they grow as
    # helper functions are found, so walk until they stop growing.
    for _ in range(4):
        before = len(names)
        env = _Walker(names, copies).run(fn, extra)
        if len(names) == before:
            return env
    return env


def watched_environment(fn):
    """:func:`environment` of ``fn`` without array copies, or ``None`` where
    it cannot be walked (a traced value, an iterator, too much): what a
    ``tapestry.checkpoint`` checks before its backward pass runs ``fn``
    again (:func:`tapestry.core.custom.checkpoint`)."""
    try:
        return environment(fn, copies=False)
    except (ReachesTraced, Unstageable):
        return None
    except Exception:  # noqa: BLE001  (an object the walk cannot read: no check)
        return None


#: Bindings a rule's watch leaves out: a dict's or object's length (an
#: entry the rule adds), results a helper caches, the process's environment.
_UNWATCHED_KINDS = frozenset({"len", "attrs", "cache", "copy"})


class RuleWatch:
    """What a derivative rule that runs after its forward pass reads besides
    its arguments (custom_vjp's ``bwd``, custom_jvp's rule transposed by the
    backward pass): the arrays it reaches, compared by content, and the
    bindings that hold values, by identity.  The caller may change them in
    place between ``tp.vjp`` and the pullback (``W -= lr * g``), or a later
    call of the function may (``cache["x"] = x`` in ``fwd``): the rule would
    then compute its derivative at other values than the forward used.

    Left out, so that bookkeeping is no change: ints and bools (a counter
    the rule steps), lengths (an entry it adds), the items a list gains (a
    log it appends to), and arrays the rule writes into itself (its
    workspace: :meth:`note_writes`).  Walked once per rule and reused while
    every binding the walk followed is as it was (:attr:`still`, identity
    tests only); ``also`` (``fwd``) is walked for :meth:`aliases` only:
    its arrays returned as residuals are copied, not watched."""

    def __init__(self, rule, also=()):
        env = environment(rule)
        followed = list(env.bindings)
        roots = set()
        for fn in also:
            other = environment(fn)
            followed += other.bindings
            roots.update(id(_root(a)) for a, *_ in other.arrays)
        self.still = _compile_check(followed, [])
        kept = [b for b in env.bindings if b[0] not in _UNWATCHED_KINDS
                and not isinstance(b[3], (int, np.integer, np.bool_))]
        self._same = Environment()
        self._same.bindings = [b for b in kept if b[0] != "seq"]
        self._unchanged = _compile_check(self._same.bindings, [])
        self._grown = [(holder, obj, label) for kind, holder, _, obj, label in kept
                       if kind == "seq"]
        self.arrays = [(a, same, label) for a, _, same, label in env.arrays]
        self.roots = roots | {id(_root(a)) for a, *_ in self.arrays}
        self.scratch: set = set()
        self._last = None
        # (nothing to check where it reads no array and no number: a module,
        # a function, a string are not rebound between forward and pullback)
        self.empty = not self.arrays and not any(
            isinstance(b[3], (float, complex, np.inexact)) for b in kept)

    def take(self):
        """The arrays' contents now: copies (a digest of a large one),
        shared with the last call's where the arrays have not changed since
        (one copy for many calls of the function: a compare, no memory)."""
        last = self._last
        if last is not None and all(s is None or _same_content(a, same, s)
                                    for (a, same, _), s in zip(self.arrays, last)):
            return last
        self._last = [None if id(a) in self.scratch else
                      a.copy() if a.nbytes <= SNAPSHOT_BYTES else _snapshot(a)
                      for a, _, _ in self.arrays]
        return self._last

    def changed(self, snaps):
        """``None`` if what the rule reads is as when ``snaps`` was taken,
        else a sentence saying what changed."""
        if not self._unchanged():
            why = self._same.changed()
            if why is not None:
                return why
        for holder, obj, label in self._grown:
            if len(holder) < len(obj) or any(a is not b for a, b in zip(holder, obj)):
                return f"{label} was modified"
        for (a, same, label), snap in zip(self.arrays, snaps):
            if snap is not None and not _same_content(a, same, snap) \
                    and id(a) not in self.scratch:
                return f"{label} was modified in place"
        return None

    def note_writes(self, snaps):
        """After the rule ran: the arrays it wrote into are its workspace,
        watched no more (their contents before it ran are not what it reads)."""
        for (a, same, _), snap in zip(self.arrays, snaps):
            if snap is not None and not _same_content(a, same, snap):
                self.scratch.add(id(a))

    def aliases(self, x):
        """Whether the array ``x`` is (a view of) an array the rules reach."""
        return id(_root(x)) in self.roots


def _same_content(a, same, snap):
    return _same_bits(a, snap) if snap.__class__ is Digest else same(a, snap)


def _root(a):
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def rule_watch(rule, also=()):
    """A :class:`RuleWatch` of ``rule``, or ``None`` where it cannot be
    walked (a traced value, an iterator, too much to guard)."""
    try:
        return RuleWatch(rule, also)
    except (ReachesTraced, Unstageable):
        return None
    except Exception:  # noqa: BLE001  (an object the walk cannot read: no check)
        return None


def object_environment(x):
    """:func:`environment` of a function or object of the user's that a
    recorded call holds (``Recorder._opaque``): the function's, or that of
    an object (its attributes, the special methods of its class), or the
    Python function of a ufunc made by ``np.frompyfunc``."""
    if isinstance(x, np.ufunc):
        from ..core.staged import python_of
        x = python_of(x)
    if isinstance(x, (types.FunctionType, types.MethodType, functools.partial)) or callable(x):
        return environment(x)
    return environment(_nothing, [x])


def _install():
    """Give core's recorder this module's walk (core imports no capability)."""
    from ..core import staged
    staged.object_environment = object_environment
    staged.watched_environment = watched_environment
    staged.rule_watch = rule_watch


_install()


def _nothing():
    """(A function of tapestry's: walking it adds nothing.)"""


class _Walker:
    def __init__(self, names, copies=True):
        self.names = names
        self.copies = copies
        self.env = Environment()
        self.seen: set = set()
        self.codes: set = set()
        self.count = 0

    def run(self, fn, extra):
        self.function(fn, "the function")
        for i, x in enumerate(extra):
            self.value(x, f"static argument {i}")
        if self.names & _ENVIRON_NAMES:  # os.environ["K"], os.getenv("K"): a library's state
            self.environ()
        self.imported()
        if self.names & _DECIMAL_NAMES:  # Decimal(1) / 3: a number the context rounds
            read = _DecimalContext()
            self.bind("eq", read, "value", read.value,
                      "decimal's context (getcontext(): precision, rounding, traps)")
        if "geterr" in self.names:
            self.env.state_read.add("errors")
        if "get_printoptions" in self.names:
            self.env.state_read.add("print")
        if "warn" in self.names or "warn_explicit" in self.names:
            self.env.state_read.add("warn")  # (WarnWatch: does the trace call it?)
        return self.env

    def imported(self):
        """The user's modules the code imports inside (``import cfg`` in the
        body, ``__import__("cfg")``): not globals of its module, but read as
        a global module is (``cfg.SCALE``)."""
        by_string = not self.names.isdisjoint(_IMPORTS_BY_STRING)
        for n in sorted(self.names):
            if n[:1] == "'":
                if not by_string:
                    continue
                n = n[1:]
            m = sys.modules.get(n)
            if isinstance(m, types.ModuleType) and not _library(m.__name__):
                self.value(m, f"module {n}")

    def environ(self):
        """The process's environment variables, compared whole (``os`` is a
        library: its module is not walked, but its ``environ`` changes)."""
        if id(os.environ) not in self.seen:
            self.seen.add(id(os.environ))
            data = getattr(os.environ, "_data", os.environ)  # (its raw mapping where it has one)
            self.bind("copy", data, None, dict(data), "os.environ")

    def bind(self, kind, holder, key, obj, label):
        self.env.bindings.append((kind, holder, key, obj, label))
        if kind == "len" or kind == "attrs":  # (its names now: what restore keeps)
            self.env.keys[id(holder)] = frozenset(holder)

    def function(self, f, label):
        if id(f) in self.seen:
            return
        self.seen.add(id(f))
        if isinstance(f, types.MethodType):
            self.value(f.__self__, f"{label}.__self__")
            self.function(f.__func__, label)
            return
        if isinstance(f, functools.partial):
            # (__setstate__ rebinds all three; the keywords are a dict the
            # caller may change in place: p.keywords["s"] = 5.0)
            for a in ("func", "args", "keywords"):
                self.bind("attr", f, a, getattr(f, a), f"{label}.{a}")
            self.function(f.func, f"{label}.func")
            for k, a in enumerate(f.args):
                self.value(a, f"{label}.args[{k}]")
            self.value(f.keywords, f"{label}.keywords")
            return
        inner = _get(f, "__tapestry_jit_fun__")
        if inner is not None:
            self.function(inner, label)
            return
        if _LRU_WRAPPER is not None and isinstance(f, _LRU_WRAPPER):
            self.lru_cache(f, label)
            return
        if not isinstance(f, types.FunctionType):
            if callable(f) and not isinstance(f, _ATOMS) and _get(f, "__dict__") is not None:
                self.obj(f, label)  # a callable object: its state and its __call__
                call = getattr(type(f), "__call__", None)
                if isinstance(call, types.FunctionType):
                    self.function(call, f"{label}.__call__")
            return
        module = f.__globals__.get("__name__", "")
        library = _library(module)
        name = f.__qualname__
        if not library:
            self.env.functions.append(f)
            _code_names(f.__code__, self.names, self.codes)
        if f.__closure__:
            for var, cell in zip(f.__code__.co_freevars, f.__closure__):
                try:
                    v = cell.cell_contents
                except ValueError:
                    continue
                self.bind("cell", cell, None, v, f"closure variable {var!r} of {name}")
                self.value(v, f"{var!r} (closure of {name})")
        wrapped = _get(f, "__wrapped__")
        if wrapped is not None:
            self.function(wrapped, label)
        if library:
            return
        for a in ("__code__", "__defaults__", "__kwdefaults__"):  # f.__defaults__ = (...)
            self.bind("attr", f, a, getattr(f, a), f"{name}.{a}")
        for k, d in enumerate(f.__defaults__ or ()):
            self.value(d, f"default argument {k} of {name}")
        if f.__kwdefaults__:  # a dict: f.__kwdefaults__["s"] = 4.0 changes it in place
            self.value(f.__kwdefaults__, f"keyword defaults of {name}")
        self.function_attributes(f, name)
        g = f.__globals__
        # (a string constant, marked, is a name too where the code can read a
        # global by a name it computes: getattr(sys.modules[__name__], "W"),
        # vars(mod)["W"]; elsewhere it is a key, p["x"], and a global of that
        # name -- a loop variable of the script -- is not read)
        by_string = not self.names.isdisjoint(_GLOBALS_BY_STRING)
        for n in sorted({m.lstrip("'") for m in self.names
                         if by_string or m[:1] != "'"}):
            if n in g:
                v = g[n]
                self.bind("dict", g, n, v, f"global {n!r} of {module}")
                self.value(v, f"global {n!r}")
        if self.names & _DYNAMIC_GLOBALS and id(g) not in self.seen:
            # globals()[name], eval(text): any global may be read, by identity
            self.seen.add(id(g))
            self.bind("len", g, None, len(g), f"len globals of {module}")
            for n, v in list(g.items()):
                if n[:2] != "__":
                    self.bind("dict", g, n, v, f"global {n!r} of {module}")

    def lru_cache(self, f, label):
        """A ``functools.lru_cache`` wrapper: the function it wraps, its
        attributes, and the results it holds -- which results (a new one
        cached during the trace traces again on the next call, which finds
        it cached) and each one's contents, as a memo dict's values: a
        function that writes into a cached array (``buf(3)[0] += 1``) runs
        uncompiled."""
        self.obj(f, label)
        wrapped = _get(f, "__wrapped__")
        if wrapped is not None:
            self.function(wrapped, label)
        held = _CachedResults(f)
        objects = held.kept = held.objects()
        self.bind("cache", held, None, frozenset(map(id, objects)),
                  f"the results cached by {label}")
        for k, v in enumerate(objects):
            self.value(v, f"result {k} cached by {label}")

    def function_attributes(self, f, name):
        """The attributes of a function of the user's that its code can
        name (``f.scale``, a table kept on the function): state like an
        object's, set and changed between calls.  Its count is guarded even
        while it has none: a helper that keeps a buffer on itself the first
        time (``helper.c = np.zeros(3)``) adds one during the trace, and the
        next call traces again, guarding it."""
        d = f.__dict__
        self.bind("attrs", d, None, len(d), f"len {name}.__dict__")
        if not d:
            return
        for n in self.attr_names(d, ()):
            if n in d and n != "__wrapped__":  # (walked as the function it wraps)
                v = d[n]
                self.bind("dict", d, n, v, f"{name}.{n}")
                self.value(v, f"{name}.{n}")

    def value(self, x, label):
        c = x.__class__
        if c in (Var, Batched, Unbatched, Staged):
            raise ReachesTraced(label)
        if c is types.BuiltinMethodType or c is types.MethodWrapperType:
            # a C method bound to an object (table.get, w.sum, vals.__getitem__):
            # it reads its object, whose state is guarded as the object's
            owner = getattr(x, "__self__", None)
            if owner is not None and not isinstance(owner, types.ModuleType):
                self.value(owner, f"{label}.__self__")
            return
        if isinstance(x, _ATOMS):
            if isinstance(x, types.ModuleType):
                self.module(x, label)  # (a library's too: np.exp = custom rebinds it)
            elif isinstance(x, type) and not _library(x.__module__):
                self.klass(x, label)  # Config.scale read through the class
            return
        if isinstance(x, (types.FunctionType, types.MethodType, functools.partial)) or \
                _get(x, "__tapestry_jit_fun__") is not None or \
                (_LRU_WRAPPER is not None and c is _LRU_WRAPPER):
            self.function(x, label)  # marks it seen itself
            return
        if x is os.environ:
            self.environ()
            return
        if id(x) in self.seen:
            return
        self.seen.add(id(x))
        self.count += 1
        if self.count > MAX_VALUES:
            raise Unstageable(f"the function reaches more than {MAX_VALUES} objects "
                              "(closures, globals, attributes) to guard")
        if c is np.ndarray or isinstance(x, np.ndarray):
            if x.dtype.hasobject:
                raise Unstageable(f"{label} is an object array, which jit cannot guard")
            if self.copies:
                self.env.arrays.append((x, x.copy(), _comparer(x), label))
            if c is not np.ndarray and _get(x, "__dict__"):
                self.obj(x, label)  # a subclass's own state: a masked array's mask
            return
        if c is tuple or c is frozenset or (isinstance(x, tuple) and hasattr(x, "_fields")):
            for k, v in enumerate(x):
                self.value(v, f"{label}[{k}]")
            return
        if isinstance(x, list):
            self.bind("seq", x, None, list(x), label)
            for k, v in enumerate(x):
                self.value(v, f"{label}[{k}]")
            return
        if isinstance(x, dict):
            self.bind("len", x, None, len(x), f"len {label}")
            for k, v in list(x.items()):
                self.bind("dict", x, k, v, f"{label}[{k!r}]")
                self.value(v, f"{label}[{k!r}]")
            return
        if isinstance(x, (set, bytearray)):
            self.bind("seq", x, None, list(x), label)
            return
        if isinstance(x, _RNG_TYPES):
            self.env.rngs.append(x)
            return
        if isinstance(x, (operator.attrgetter, operator.methodcaller)):
            # attrgetter("w") reads attributes its caller's code never names
            for a in x.__reduce__()[1]:
                if isinstance(a, str):
                    self.names.update(a.split("."))
                else:
                    self.value(a, f"{label} argument")
            return
        if _buffer(x) is not None:  # array.array, memoryview: compared bitwise
            self.bind("bytes", x, None, _buffer(x), f"{label} (its bytes)")
            return
        if isinstance(x, (collections.deque, collections.abc.MutableSequence)):
            self.bind("seq", x, None, list(x), label)
            for k, v in enumerate(x):
                self.value(v, f"{label}[{k}]")
            return
        if isinstance(x, collections.abc.Mapping) and hasattr(x, "get"):
            self.bind("len", x, None, len(x), f"len {label}")
            for k, v in list(x.items()):
                self.bind("dict", x, k, v, f"{label}[{k!r}]")
                self.value(v, f"{label}[{k!r}]")
            return
        if c is contextvars.ContextVar:  # scale.get(): its value in the caller's context
            read = _ContextRead(x)
            self.bind("eq", read, "value", read.value, f"{label}.get()")
            if read.value is not _MISSING:
                self.value(read.value, f"{label}.get()")
            return
        if isinstance(x, weakref.ref):
            target = x()
            self.bind("ref", x, None, target, f"{label}()")
            if target is not None:
                self.value(target, f"{label}()")
            return
        if hasattr(type(x), "__next__"):
            # an iterator, a generator, a file: its position is state that no
            # guard sees, and next() on it is a read a replay would repeat
            raise Unstageable(f"{label} is an iterator ({type(x).__name__}), whose "
                              "state jit cannot guard")
        self.obj(x, label)
        call = getattr(type(x), "__call__", None)
        if isinstance(call, types.FunctionType):  # m(v) reads m's __call__ (no name for it)
            self.function(call, f"{label}.__call__")

    def klass(self, k, label):
        """A user class reached as a value: the class attributes the code
        names (``Config.scale``), as a module's."""
        if id(k) in self.seen:
            return
        self.seen.add(id(k))
        for n in self.attr_names(None, ()):
            found = False
            for base in k.__mro__:
                if base is object or _library(base.__module__):
                    break
                if n in base.__dict__:
                    v = base.__dict__[n]
                    self.unshadowed(k, base, n)
                    self.bind("dict", base.__dict__, n, v, f"{k.__name__}.{n}")
                    if isinstance(v, (staticmethod, classmethod)):
                        v = v.__func__
                    if not isinstance(v, property):
                        self.value(v, f"{k.__name__}.{n}")
                    found = True
                    break
            if not found:
                self.from_metaclass(k, n)
            self.overridden(k, n)
        # (an attribute the function adds, K.c = np.zeros(3) the first time:
        # the next call traces again, guarding it)
        self.bind("attrs", k.__dict__, None, len(k.__dict__), f"len {k.__name__}.__dict__")

    def from_metaclass(self, k, n):
        """``k.n`` served by a user metaclass (``class Meta(type): scale =
        2.0``): bound there, and absent from ``k``'s own classes."""
        for meta in type(k).__mro__:
            if meta is type or meta is object or _library(meta.__module__):
                return
            if n in meta.__dict__:
                self.unshadowed(k, None, n)
                v = meta.__dict__[n]
                self.bind("dict", meta.__dict__, n, v, f"{meta.__name__}.{n}")
                if not isinstance(v, (property, staticmethod, classmethod)):
                    self.value(v, f"{k.__name__}.{n}")
                return

    def attr_names(self, d, classes, everything=False):
        """The attribute names to guard on an object (or module) with the
        namespace ``d``: those the code names, or, when the code computes
        names (``getattr(self, "w%d" % i)``, ``vars(obj)``, a ``__getattr__``),
        all of them."""
        names = {a.lstrip("'") for a in self.names}
        if not everything and not names & _DYNAMIC and \
                not (d is not None and classes and _library(classes[0].__module__)):
            if self.names.isdisjoint(_ATTRS_BY_STRING):
                # (a string constant is a key, p["x"], not an attribute read:
                # an attribute x the caller sets on every step is not guarded)
                return sorted(a for a in self.names if a[:1] != "'")
            return sorted(names)
        # computed names, or an object of a library type (tp.custom_jvp holding
        # the user's rule, an optimizer's state): its code is not walked for
        # names, so every attribute counts
        if d is not None:
            names.update(k for k in d if isinstance(k, str))
        for klass in classes:
            if not _library(klass.__module__):
                names.update(k for k in klass.__dict__ if not k.startswith("__"))
        return sorted(names)

    def obj(self, x, label):
        """A user object: the attributes its code can name."""
        if isinstance(x, threading.local):
            self.thread_local(x, label)
            return
        d = _get(x, "__dict__")
        if _library(type(x).__module__) and d is None:
            return
        hook = _attribute_hook(type(x))
        if hook is not None:  # attributes served by __getattr__: its reads count
            self.function(hook, f"{label}.{hook.__name__}")
        for name, special in _special_methods(type(x)):
            # ds[i], len(ds), iter(net), np.asarray(w), s * x: Python calls
            # these without naming them, so the names they read count too
            self.function(special, f"{label}.{name}")
        if _get(x, "__class__") is type(x):  # (obj.__class__ = Other: other methods)
            self.bind("attr", x, "__class__", type(x), f"{label}.__class__")
        if d is not None:  # an attribute added (self.last = h): a change
            self.bind("attrs", d, None, len(d), f"len {label}.__dict__")
        for n in self.attr_names(d, type(x).__mro__, hook is not None):
            if d is not None and n in d:
                v = d[n]
                self.bind("dict", d, n, v, f"{label}.{n}")
                self.value(v, f"{label}.{n}")
            else:
                for klass in type(x).__mro__:
                    if n in klass.__dict__ and not _library(klass.__module__):
                        self.unshadowed(type(x), klass, n)
                        v = klass.__dict__[n]
                        if isinstance(v, (staticmethod, classmethod)):
                            v = v.__func__
                        if isinstance(v, property):  # (C.k = property(...) rebinds it)
                            self.bind("dict", klass.__dict__, n, klass.__dict__[n],
                                      f"{klass.__name__}.{n}")
                            self.function(v.fget, f"{label}.{n}")
                            break
                        if isinstance(v, types.MemberDescriptorType):  # __slots__
                            cur = _get(x, n, _MISSING)
                            # a C type's member makes a new number on each read
                            kind = "attr" if n in getattr(klass, "__slots__", ()) else "eq"
                            self.bind(kind, x, n, cur, f"{label}.{n}")
                            if cur is not _MISSING:
                                self.value(cur, f"{label}.{n}")
                            break
                        # the class's binding, and no instance attribute
                        # hiding it (``getattr`` would make a new bound method
                        # on every call: never the same object)
                        if d is not None:
                            self.bind("dict", d, n, _MISSING, f"{label}.{n}")
                        self.bind("dict", klass.__dict__, n, klass.__dict__[n],
                                  f"{klass.__name__}.{n}")
                        self.value(v, f"{type(x).__name__}.{n}")
                        break
                self.overridden(type(x), n)

    def thread_local(self, x, label):
        """A ``threading.local``: each thread sees its own attributes, so
        they are bound by name (read in the calling thread at every check),
        not through the namespace of the thread that traced."""
        d = _get(x, "__dict__") or {}
        for n in self.attr_names(d, type(x).__mro__, True):
            if n.startswith("__"):
                continue
            v = _get(x, n, _MISSING)
            if isinstance(v, types.MethodType) and v.__self__ is x:
                continue  # (a method of a subclass: a new bound object on each read)
            self.bind("attr", x, n, v, f"{label}.{n} (thread-local)")
            if v is not _MISSING:
                self.value(v, f"{label}.{n}")

    def unshadowed(self, cls, found, n):
        """``n`` is absent from the user's classes before ``found`` in
        ``cls``'s MRO: a subclass that defines it later (``C.k = 5.0`` where
        a base defines ``k``) hides ``found``'s, so each absence is bound."""
        for klass in cls.__mro__:
            if klass is found:
                return
            if klass is not object and not _library(klass.__module__):
                self.bind("dict", klass.__dict__, n, _MISSING, f"{klass.__name__}.{n}")

    def overridden(self, cls, n):
        """The definitions of ``n`` in ``cls``'s bases that its own hides:
        ``super().n(...)`` reaches them, so they are bound and walked too."""
        found = False
        for klass in cls.__mro__:
            if klass is object or _library(klass.__module__) or n not in klass.__dict__:
                continue
            if found:
                v = klass.__dict__[n]
                self.bind("dict", klass.__dict__, n, v, f"{klass.__name__}.{n}")
                if isinstance(v, (staticmethod, classmethod)):
                    v = v.__func__
                if isinstance(v, property):
                    self.function(v.fget, f"{klass.__name__}.{n}")
                else:
                    self.value(v, f"{klass.__name__}.{n}")
            found = True

    def module(self, m, label):
        """The attributes of a module the code names.  A library's are
        bound by identity and not walked (their values are trusted): a
        user who rebinds one between calls (``np.exp = custom``, a
        monkeypatched ``tp.nn.relu``) changes what a plain call runs, and
        the trace ran the old one.  What the user put there is walked."""
        if id(m) in self.seen:
            return
        self.seen.add(id(m))
        d = m.__dict__
        library = _library(getattr(m, "__name__", None))
        if not library:  # (a user module the function adds to, mod.c = ...: as a class)
            self.bind("attrs", d, None, len(d), f"len {m.__name__}.__dict__")
        for n in self.attr_names(None, ()):
            if n in d:
                v = d[n]
                self.bind("dict", d, n, v, f"{m.__name__}.{n}")
                if not library or isinstance(v, types.ModuleType) or not _trusted(v):
                    self.value(v, f"{m.__name__}.{n}")


# --- bitwise comparison of an array with its snapshot ----------------------------
_libc = None


def _memcmp():
    global _libc
    if _libc is None:
        try:
            lib = ctypes.CDLL(None)
            f = lib.memcmp
            f.restype = ctypes.c_int
            f.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
            _libc = f
        except (OSError, AttributeError):  # pragma: no cover - no libc (not CPython/POSIX)
            _libc = False
    return _libc


def _comparer(x):
    """A function ``same(a, snapshot)`` for arrays like ``x``: bitwise
    equality (NaN equals NaN, -0.0 differs from 0.0) of the same shape and
    dtype; the fastest way for its size and layout."""
    def meta(a, s):
        return a.shape == s.shape and a.dtype == s.dtype
    if x.size == 0:
        return meta
    if x.flags.c_contiguous and x.nbytes <= 512 and x.dtype.kind in "biufc" \
            and x.dtype.fields is None:  # (no buffer for datetime64, say)
        def same(a, s):
            return meta(a, s) and a.flags.c_contiguous and \
                memoryview(a).cast("B") == memoryview(s).cast("B")
        return same
    mc = _memcmp()
    if x.flags.c_contiguous and mc:
        from .split import same_bytes  # (split's threads; split imports nothing of env)

        def same(a, s):
            return meta(a, s) and a.flags.c_contiguous and \
                same_bytes(mc, a.ctypes.data, s.ctypes.data, a.nbytes)
        return same

    def same(a, s):
        if not meta(a, s):
            return False
        if a.dtype.kind not in "fciub":  # (datetimes, strings, records: their bytes)
            return bool(np.array_equal(np.ascontiguousarray(a).reshape(-1).view(np.uint8),
                                       np.ascontiguousarray(s).reshape(-1).view(np.uint8)))
        if a.dtype.kind in "fc":
            return bool(np.array_equal(a, s, equal_nan=True)) and \
                bool(np.array_equal(np.signbit(a.real), np.signbit(s.real))) and \
                (a.dtype.kind == "f" or
                 bool(np.array_equal(np.signbit(a.imag), np.signbit(s.imag))))
        return bool(np.array_equal(a, s))
    return same


# --- random state ------------------------------------------------------------------
def rng_states(env):
    """The state of every generator a trace could draw from."""
    states = [_np_global_state(), random.getstate()]
    for g in env.rngs:
        if isinstance(g, random.Random):
            states.append(g.getstate())
        elif isinstance(g, np.random.SeedSequence):
            states.append(g.n_children_spawned)
        else:
            bg = g.bit_generator if isinstance(g, (np.random.Generator,)) else \
                getattr(g, "_bit_generator", g)
            # rng.spawn() advances the seed sequence, not the generator's state
            seq = getattr(bg, "seed_seq", None)
            states.append((_freeze(bg.state), getattr(seq, "n_children_spawned", None)))
    return states


def raw_rng_states(env):
    """What :func:`restore_rng_states` puts back: the states of every
    generator a trace could draw from, as their own ``get_state`` gives
    them (a spawning ``SeedSequence`` cannot be put back: left out)."""
    states = [np.random.get_state(), random.getstate()]
    for g in env.rngs:
        if isinstance(g, random.Random):
            states.append((g, g.getstate()))
        elif isinstance(g, np.random.Generator):
            states.append((g, g.bit_generator.state))
        elif isinstance(g, np.random.RandomState):
            states.append((g, g.get_state()))
        elif isinstance(g, np.random.BitGenerator):
            states.append((g, g.state))
    return states


def restore_rng_states(states):
    """Put back the states :func:`raw_rng_states` took."""
    np.random.set_state(states[0])
    random.setstate(states[1])
    for g, st in states[2:]:
        if isinstance(g, random.Random):
            g.setstate(st)
        elif isinstance(g, np.random.Generator):
            g.bit_generator.state = st
        elif isinstance(g, np.random.RandomState):
            g.set_state(st)
        else:
            g.state = st


def _np_global_state():
    try:
        return _freeze(np.random.mtrand._rand._bit_generator.state)
    except AttributeError:  # pragma: no cover - NumPy internals moved
        return _freeze(np.random.get_state(legacy=False))


def _freeze(state):
    if isinstance(state, dict):
        return tuple((k, _freeze(v)) for k, v in sorted(state.items()))
    if isinstance(state, np.ndarray):
        return state.tobytes()
    return state


class EntropyWatch:
    """Counts reads of the operating system's entropy (``os.urandom``, which
    ``np.random.default_rng()``, ``SeedSequence()`` and ``secrets`` use)
    while a trace runs: an unseeded generator made inside the function draws
    new numbers on every plain call, which a replay would repeat.  The spy is
    installed while any trace runs (reads by other threads count too: the
    safe side)."""

    _lock = threading.Lock()
    _active = 0
    reads = 0
    _saved = None

    def __enter__(self):
        cls = EntropyWatch
        with cls._lock:
            if cls._active == 0:
                cls._saved = (random._urandom, os.urandom)
                random._urandom = _spy(cls._saved[0])
                os.urandom = _spy(cls._saved[1])
            cls._active += 1
            self.start = cls.reads
        return self

    def __exit__(self, *exc):
        cls = EntropyWatch
        with cls._lock:
            self.drew = cls.reads != self.start
            cls._active -= 1
            if cls._active == 0:
                random._urandom, os.urandom = cls._saved
        return False


def _spy(urandom):
    def spied(n):
        if not _importing():
            EntropyWatch.reads += 1
        return urandom(n)
    return spied


def _importing():
    """Whether the caller runs inside an import: a module's first import
    (``multiprocessing`` draws its process's ``authkey`` then, and the
    first ``executor="processes"`` call imports it inside the trace) reads
    the entropy once, not at every plain call, so a replay repeats nothing
    the plain calls would have done differently.  Counting it made such a
    function run uncompiled for good, with a warning about random draws it
    does not make."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


def rng_changed(before, env):
    """Which generator's state a trace changed (a sentence), or ``None``."""
    after = rng_states(env)
    if after[0] != before[0]:
        return "NumPy's global random generator (np.random.*)"
    if after[1] != before[1]:
        return "Python's random module"
    for g, a, b in zip(env.rngs, after[2:], before[2:]):
        if a != b:
            return f"the generator {type(g).__name__} it reads"
    return None


#: Python's own warning functions: a warning a call of them issues comes
#: from the function's code, not from a NumPy call the program replays.
_WARN_FUNCTIONS = (warnings.warn, warnings.warn_explicit)


class WarnWatch:
    """Whether the function's code calls ``warnings.warn`` while a trace runs
    (``if x.sum() > 2: warnings.warn("big")``): a replay issues the warnings
    of the NumPy calls it makes, not those of the Python code around them,
    so such a trace runs uncompiled.  Watched (through ``sys.setprofile``
    on the tracing thread) only where the code names ``warn``: a profile
    hook slows the trace.  Under another profiler the hook cannot be
    chained: a call is assumed (the safe side)."""

    def __init__(self, on):
        self.on = on
        self.called = False

    def __enter__(self):
        if not self.on:
            return self
        prev = self.prev = sys.getprofile()
        if prev is not None and not getattr(prev, "tapestry_warn_watch", False):
            self.called = True
            return self

        def hook(frame, event, arg):
            # (a library's own warning, np.mean of an empty slice, comes from
            # inside a call the program makes again: its replay issues it)
            if event == "c_call" and any(arg is w for w in _WARN_FUNCTIONS) and \
                    not _library(frame.f_globals.get("__name__")):
                self.called = True
            if prev is not None:  # (the watch of a trace this one runs inside)
                prev(frame, event, arg)
        hook.tapestry_warn_watch = True
        sys.setprofile(hook)
        self.installed = True
        return self

    def __exit__(self, *exc):
        if self.on and getattr(self, "installed", False):
            sys.setprofile(self.prev)
        return False
