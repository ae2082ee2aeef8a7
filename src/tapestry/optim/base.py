"""The optimizer protocol: ``opt.update(params, grads)`` updates a pytree of
parameters in place, leaf by leaf, choosing the dense or the sparse path by
the gradient's type.

A sparse gradient (:class:`~tapestry.sparse.AxisSparse`) is coalesced once
(sorted unique indices, repeated slices summed) and then only its slices of
the parameter and of the optimizer state are read and written: the update
costs O(|S|), whatever the parameter's size.  Clipping by global norm keeps
that: a sparse gradient's norm is its coalesced values' norm, and clipping
scales the values without densifying.

Mistakes refused rather than run: parameters passed to the constructor
(PyTorch's habit), ``update(grads, params)`` (optax's order) once it can be
told, hyperparameters that are not finite or out of range (checked at
construction and again at each update, so a value assigned later is checked
too), and a saved state loaded into another optimizer class or another
parameter tree.
"""
from __future__ import annotations

import inspect
import re
import weakref

import numpy as np

from ..core.pytree import flatten_up_to, leaf_paths, tree_flatten
from ..sparse import AxisSparse

_META_KEYS = ("t", "n_leaves", "optimizer", "paths")
_LEGACY_KEY = re.compile(r"^(\d+)\.(.+)$")   # '0.m': state saved before keys named paths


class Optimizer:
    """Base class: per-leaf state, created on first use, kept by leaf position
    (saved by leaf path: see :meth:`state_dict`).

    ``lr`` is a positive number or a schedule: a callable of the step count
    (0 for the first update, as in optax) returning the rate.  ``clip_norm``
    (optional) rescales the gradients so that their global L2 norm is at
    most ``clip_norm`` before the step (``torch.nn.utils.clip_grad_norm_``).

    Subclasses implement ``_dense(p, g, state)`` and ``_sparse(p, key, g_rows,
    state)`` where ``key`` selects the touched slices (unique indices) and
    ``g_rows`` are the gradient's values there, and ``_validate()`` checking
    their hyperparameters (after ``super()._validate()``).  ``self.t`` is the
    number of ``update`` calls so far (1 during the first); ``self.lr`` is
    the rate of the current step.
    """

    def __new__(cls, *args, **kwargs):
        # Before __init__ binds its arguments: ``Adam([p], lr=0.1)`` would
        # otherwise fail with "got multiple values for argument 'lr'".
        if args and _looks_like_params(args[0]) and _first_parameter(cls) == "lr":
            raise TypeError(
                f"tapestry.optim.{cls.__name__}: the first argument is the learning rate, "
                f"got a {type(args[0]).__name__} (parameters?). tapestry's optimizers take "
                f"the parameters in update, not in the constructor: opt = "
                f"tapestry.optim.{cls.__name__}(lr=...), then opt.update(params, grads) "
                "at each step.")
        return super().__new__(cls)

    def __init__(self, lr, clip_norm=None):
        self.schedule = lr if callable(lr) else None
        self.lr = lr if self.schedule is None else None
        self.clip_norm = clip_norm
        self.t = 0
        self.state: list = []
        self._treedef = None
        self._paths = None   # leaf paths ("params['W']") of the tree the state belongs to
        self._last = None    # weak references to the last update's (params, grads) leaves

    def __getstate__(self):
        # Weak references do not pickle, and a copy updates other arrays.
        return {**self.__dict__, "_last": None}

    def _validate(self):
        """Refuse hyperparameters that would give silently wrong steps (nan,
        inf, negative rates, ...); runs at construction and at each update."""
        where = f"tapestry.optim.{type(self).__name__}"
        if self.schedule is None:
            lr = _real(where, "lr", self.lr, extra=" or a schedule (a callable of the step)")
            if not (lr > 0 and np.isfinite(lr)):
                raise ValueError(f"{where}: lr must be positive and finite or a schedule "
                                 f"(a callable of the step), got {self.lr!r}.")
        if self.clip_norm is not None:
            _check_max_norm(where, "clip_norm", self.clip_norm)

    def update(self, params, grads, *extra):
        """Apply one step to ``params`` (a pytree of float arrays, modified in
        place) given ``grads`` (same structure; dense or sparse leaves;
        ``None`` leaves skip their parameter)."""
        if extra:
            raise TypeError(f"tapestry.optim.{type(self).__name__}.update takes (params, "
                            f"grads), got {2 + len(extra)} arguments; optax's "
                            "update(grads, state, params) does not apply: the optimizer "
                            "keeps its own state and updates params in place.")
        self._validate()
        p_leaves, g_raw = self._check(params, grads)
        g_leaves = [_prepared(g, p) for p, g in zip(p_leaves, g_raw)]
        if self.clip_norm is not None:
            g_leaves = _clipped(g_leaves, self.clip_norm)[0]
        if self.schedule is not None:
            self.lr = self._scheduled_lr(self.t)
        self.t += 1
        for k, (p, g) in enumerate(zip(p_leaves, g_leaves)):
            if g is None:
                continue
            if self.state[k] is None:
                self.state[k] = self._init_state(p)
            if isinstance(g, AxisSparse):
                self._sparse(p, g.key(), g.values, self.state[k])
            else:
                self._dense(p, g, self.state[k])
        self._last = ([_ref(p) for p in p_leaves], [_ref(g) for g in g_raw])
        return params

    def _scheduled_lr(self, step):
        lr = self.schedule(step)
        try:
            lr = float(lr)
        except TypeError:
            lr = float("nan")
        if not (lr >= 0 and np.isfinite(lr)):
            raise ValueError(f"tapestry.optim.{type(self).__name__}: the lr schedule "
                             f"returned {lr!r} at step {step}; it must return a finite "
                             "number >= 0.")
        return lr

    def _check(self, params, grads):
        """Flat leaves of params and grads, validated before any state changes."""
        p_leaves, p_td = tree_flatten(params)
        g_leaves, g_td = tree_flatten(grads)
        name = type(self).__name__
        if g_td != p_td:  # None where params have a leaf: skip that parameter
            try:
                g_leaves = flatten_up_to(p_td, grads)
            except ValueError as e:
                # the structures differ (a list for a tuple, a missing key) even
                # when the leaf counts agree: name where, from flatten_up_to
                where = str(e).split(": ", 1)[-1]
                raise ValueError(f"tapestry.optim.{name}.update: grads do not have the "
                                 f"structure of params ({len(g_leaves)} leaves, {g_td}, vs "
                                 f"{len(p_leaves)} leaves, {p_td}): {where} Pass the "
                                 "gradient of the same pytree, in the order "
                                 "update(params, grads).") from None
        for p, g in zip(p_leaves, g_leaves):
            if g is not None:
                _check_param(p, g, name)
        self._check_order(p_leaves, g_leaves)
        if self._treedef is None:
            paths = leaf_paths(p_td, "params")
            if self.state:
                self._check_loaded(p_leaves, paths)
            self._treedef, self._paths = p_td, paths
            self.state = self.state or [None] * len(p_leaves)
        elif p_td != self._treedef:
            raise ValueError(f"tapestry.optim.{name}.update: params "
                             "changed structure since the first update; use one "
                             "optimizer per parameter pytree.")
        else:
            self._check_shapes(p_leaves)
        return p_leaves, g_leaves

    def _check_shapes(self, p_leaves):
        """Each parameter keeps the shape its state was made for (a resized
        layer under the same name got NumPy's broadcast error, or for a
        shape that broadcasts, a silent step with the old state)."""
        for k, (p, st) in enumerate(zip(p_leaves, self.state)):
            for slot, arr in (st or {}).items():
                if isinstance(arr, np.ndarray) and arr.shape != p.shape:
                    raise ValueError(
                        f"tapestry.optim.{type(self).__name__}.update: {self._paths[k]} has "
                        f"shape {p.shape} but its state {slot!r} was made for "
                        f"{arr.shape}; a resized parameter needs a new optimizer.")

    def _check_order(self, p_leaves, g_leaves):
        """Refuse ``update(grads, params)`` where the previous call tells:
        the "grads" are the very arrays updated as parameters last time, or
        the "grads" are last call's "grads" objects again while every
        "params" array is new (parameters persist, gradients are fresh)."""
        if self._last is None or len(self._last[0]) != len(p_leaves):
            return
        prev_p, prev_g = self._last
        name = type(self).__name__
        order = ("tapestry's order is update(params, grads) (optax's update takes grads "
                 "first; PyTorch's step() reads .grad)")
        if any(g is not None and _deref(r) is g for r, g in zip(prev_p, g_leaves)):
            raise ValueError(f"tapestry.optim.{name}.update: the arrays passed as grads "
                             "are the ones the previous update changed as params: the "
                             f"arguments look swapped; {order}.")
        given = [(r, g) for r, g in zip(prev_g, g_leaves) if g is not None]
        if (given and all(_deref(r) is g for r, g in given)
                and not any(_deref(r) is p for r, p in zip(prev_p, p_leaves))):
            raise ValueError(f"tapestry.optim.{name}.update: grads are the same array "
                             "objects as in the previous update while every params array "
                             f"is new: the arguments look swapped; {order}. (Meant it? "
                             "Pass a copy of the gradients.)")

    def _init_state(self, p):
        return {}

    # --- saving and restoring ---------------------------------------------
    def state_dict(self):
        """The optimizer's state as a flat ``{name: array}`` dict, ready for
        ``np.savez(path, **opt.state_dict())`` (arrays are copies).

        Keys: ``"t"`` (steps taken), ``"n_leaves"``, ``"optimizer"`` (the
        class name), ``"paths"`` (each parameter's path, in leaf order) and
        one ``"<path>.<slot>"`` per state array, the path written as Python
        reaches the leaf from ``params``: ``"params['W'].m"``,
        ``"params['layers'][0]['b'].buf"``, ``"params.m"`` for a single array."""
        out = {"t": np.array(self.t), "n_leaves": np.array(len(self.state)),
               "optimizer": np.array(type(self).__name__)}
        if self._paths is not None or not self.state:
            out["paths"] = np.array(self._paths or [], dtype=str)
        for k, st in enumerate(self.state):
            prefix = self._paths[k] if self._paths is not None else str(k)
            for slot, arr in (st or {}).items():
                out[f"{prefix}.{slot}"] = np.array(arr, copy=True)
        return out

    def load_state_dict(self, d):
        """Restore a :meth:`state_dict` (a dict or ``np.load``'s result).  It
        must come from the same optimizer class with hyperparameters that keep
        the same state (e.g. momentum on or off); the next ``update`` checks
        that its params have the saved paths and shapes.  State saved with
        index keys (``"0.m"``) still loads, checked by leaf count."""
        name = type(self).__name__
        where = f"tapestry.optim.{name}.load_state_dict"
        if "t" not in d or "n_leaves" not in d:
            raise ValueError(f"{where}: not an optimizer state (keys 't' and 'n_leaves' "
                             "are missing).")
        saved_by = str(d["optimizer"]) if "optimizer" in d else None
        if saved_by is not None and saved_by != name:
            raise ValueError(f"{where}: the state was saved by {saved_by}, not {name}; "
                             f"load it into a tapestry.optim.{saved_by}.")
        n = int(d["n_leaves"])
        paths = [str(p) for p in d["paths"]] if "paths" in d else None
        if paths is not None and len(paths) != n:
            raise ValueError(f"{where}: 'paths' has {len(paths)} entries but 'n_leaves' "
                             f"is {n}; the state is damaged.")
        state = [None] * n
        for key in d:
            if key not in _META_KEYS:
                k, slot = _state_slot(key, paths, n, where)
                state[k] = state[k] or {}
                state[k][slot] = np.array(d[key], copy=True)
        self._check_slots(state, paths, where)
        t = np.asarray(d["t"])
        if t.ndim or t.dtype.kind not in "iu" or t < 0:
            raise ValueError(f"{where}: 't' (steps taken) must be an integer >= 0, got "
                             f"{t!r}; the state is damaged.")
        self.t, self.state = int(t), state
        self._treedef, self._paths, self._last = None, paths, None
        return self

    def _check_slots(self, state, paths, where):
        """Every leaf's saved slots are the ones this optimizer keeps."""
        expected = sorted(self._init_state(np.zeros(0)))
        for k, st in enumerate(state):
            if st is not None and sorted(st) != expected:
                leaf = paths[k] if paths is not None else f"leaf {k}"
                keeps = ", ".join(map(repr, expected)) or "no state"
                raise ValueError(f"{where}: the state of {leaf} holds "
                                 f"{', '.join(map(repr, sorted(st)))} but this "
                                 f"{type(self).__name__} keeps {keeps}; make the optimizer "
                                 "with the hyperparameters the state was saved with "
                                 "(momentum, centered, ...).")

    def _check_loaded(self, p_leaves, paths):
        """The first update after loading: the params are the tree the state
        was saved for (same leaf paths and shapes)."""
        where = f"tapestry.optim.{type(self).__name__}.update"
        if self._paths is not None and self._paths != paths:
            missing = [p for p in self._paths if p not in paths]
            new = [p for p in paths if p not in self._paths]
            raise ValueError(f"{where}: the loaded state was saved for params with leaves "
                             f"{self._paths}, these params have {paths} (saved only: "
                             f"{missing}, new: {new}); pass the same parameter tree.")
        if len(self.state) != len(p_leaves):
            raise ValueError(f"{where}: the loaded state has {len(self.state)} leaves but "
                             f"params have {len(p_leaves)}.")
        for k, (p, st) in enumerate(zip(p_leaves, self.state)):
            for slot, arr in (st or {}).items():
                if arr.shape != p.shape:
                    raise ValueError(f"{where}: the loaded state {slot!r} of {paths[k]} has "
                                     f"shape {arr.shape} but the parameter has {p.shape}.")


def _state_slot(key, paths, n, where):
    """(leaf index, slot name) of a saved state key."""
    legacy = _LEGACY_KEY.match(key) if paths is None else None
    if legacy:
        k, slot = int(legacy.group(1)), legacy.group(2)
        if k < n:
            return k, slot
    elif paths is not None and "." in key:
        path, slot = key.rsplit(".", 1)
        if path in paths:
            return paths.index(path), slot
    raise ValueError(f"{where}: the key {key!r} names no parameter of the saved state "
                     f"({paths if paths is not None else f'{n} leaves'}).")


def _first_parameter(cls):
    """The name of ``cls.__init__``'s first parameter after self (a subclass
    may take something else first)."""
    names = list(inspect.signature(cls.__init__).parameters)
    return names[1] if len(names) > 1 else None


def _looks_like_params(x):
    """A container or iterator where a learning rate was expected."""
    if isinstance(x, np.ndarray):
        return x.ndim > 0
    return isinstance(x, (list, tuple, dict, set)) or inspect.isgenerator(x) or (
        hasattr(x, "__next__") and not callable(x))


def _real(where, name, value, extra=""):
    """``value`` as a float; TypeError naming ``name`` unless a real scalar."""
    try:
        a = np.asarray(value)
        real = a.ndim == 0 and a.dtype.kind in "iuf"
    except (TypeError, ValueError):
        real = False
    if not real or isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{where}: {name} must be a real number{extra}, got {value!r}.")
    return float(value)


def _hyper(where, name, value, low=0.0, strict=False, below=None):
    """Refuse ``value`` unless finite and >= ``low`` (> when ``strict``) and
    < ``below`` when given; ``name`` is named in the message."""
    v = _real(where, name, value)
    ok = np.isfinite(v) and (v > low if strict else v >= low) and (below is None or v < below)
    if not ok:
        rule = (f"in [{low:g}, {below:g})" if below is not None
                else f"{'>' if strict else '>='} {low:g}")
        raise ValueError(f"{where}: {name} must be a finite number {rule}, got {value!r}.")
    return v


def _check_max_norm(where, name, value):
    """A clipping norm: > 0 (inf: no clipping); a negative one would flip
    the gradients' sign, nan would make them nan."""
    v = _real(where, name, value)
    if not v > 0:
        raise ValueError(f"{where}: {name} must be positive, got {value!r}.")
    return v


def _ref(x):
    try:
        return weakref.ref(x)
    except TypeError:  # floats, AxisSparse (slots): never compared by identity
        return None


def _deref(r):
    return None if r is None else r()


def _prepared(g, p):
    """Sparse gradients coalesced in the parameter's dtype; dense ones as arrays."""
    if g is None:
        return None
    if isinstance(g, AxisSparse):
        c = g.coalesce()
        return c if c.dtype == p.dtype else c.astype(p.dtype)
    return np.asarray(g, dtype=p.dtype)


def _clipped(g_leaves, max_norm):
    """(leaves scaled so their global norm is at most ``max_norm``, the norm)."""
    sq = 0.0
    for g in g_leaves:
        if g is not None:
            v = g.values if isinstance(g, AxisSparse) else g
            sq += float(np.vdot(v, v).real)
    norm = np.sqrt(sq)
    scale = float(max_norm / (norm + 1e-6))
    if scale >= 1.0:
        return g_leaves, norm
    return [None if g is None else g * scale for g in g_leaves], norm


def clip_by_global_norm(grads, max_norm):
    """``(clipped, norm)``: ``grads`` (a pytree) scaled by
    ``max_norm / (norm + 1e-6)`` when their global L2 norm exceeds
    ``max_norm`` (PyTorch's ``clip_grad_norm_`` rule).  ``AxisSparse`` leaves
    are coalesced and scaled in place of their values: never densified."""
    _check_max_norm("tapestry.optim.clip_by_global_norm", "max_norm", max_norm)
    leaves, td = tree_flatten(grads)
    leaves = [g.coalesce() if isinstance(g, AxisSparse)
              else (None if g is None else np.asarray(g)) for g in leaves]
    clipped, norm = _clipped(leaves, max_norm)
    return td.unflatten(clipped), norm


def _check_param(p, g, name):
    if isinstance(p, AxisSparse):
        raise TypeError(f"tapestry.optim.{name}.update: a parameter is an AxisSparse, "
                        "a gradient: the arguments look swapped; tapestry's order is "
                        "update(params, grads).")
    if type(p) is not np.ndarray or p.dtype.kind != "f":
        raise TypeError(f"tapestry.optim.{name}: parameters must be float NumPy arrays "
                        f"(updated in place), got {type(p).__name__}"
                        f"{'' if type(p) is not np.ndarray else ' of dtype ' + str(p.dtype)}.")
    if not p.flags.writeable:
        raise ValueError(f"tapestry.optim.{name}: a parameter array is read-only; "
                         "pass writeable arrays (np.array(x, copy=True)).")
    if np.shape(g) != p.shape:
        raise ValueError(f"tapestry.optim.{name}: gradient shape {np.shape(g)} does not "
                         f"match parameter shape {p.shape}.")
    if isinstance(g, np.ma.MaskedArray):  # np.asarray would step on its masked data
        raise TypeError(f"tapestry.optim.{name}: a gradient is a NumPy masked array; "
                        "pass plain data (g.filled(0) skips the masked entries).")
    if np.iscomplexobj(g.values if isinstance(g, AxisSparse) else g):
        raise TypeError(f"tapestry.optim.{name}: a gradient is complex but its parameter "
                        f"is real ({p.dtype}); casting would drop the imaginary part. "
                        "The gradient of a real parameter is real: take np.real(g) if "
                        "that is what is meant.")
