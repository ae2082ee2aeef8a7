"""Parsing index notation: ``y[i,j] := (w[k,i] - x[k,j])**2``.

Grammar (``(max)`` prefix and ``|> f`` finalizer optional)::

    spec   := ['(' sum|max|min ')'] NAME '[' names ']' ':=' expr ['|>' NAME]
    expr   := term (('+'|'-') term)*        term := unary (('*'|'/') unary)*
    unary  := '-' unary | power             power := atom ['**' unary]
    atom   := NUMBER | NAME '[' affine, ... ']' | NAME '(' expr, ... ')' | '(' expr ')'
    affine := [INT '*'] NAME | INT, joined by '+' / '-'

The tree is plain tuples so it hashes and compares (used by the symbolic
derivative and the plan caches):

    ('num', value)  ('ref', name, (affine, ...))  ('call', fn, (arg, ...))
    ('bin', op, a, b)   with op in + - * / **
    affine = (((var, coef), ...), const)   -- terms sorted by var name
"""
from __future__ import annotations

import re
from dataclasses import dataclass

#: Elementwise functions a body may call, with their arity.
FUNCTIONS = {"exp": 1, "log": 1, "log1p": 1, "expm1": 1, "sqrt": 1, "tanh": 1,
             "sin": 1, "cos": 1, "abs": 1, "sigmoid": 1, "relu": 1, "square": 1,
             "sign": 1, "maximum": 2, "minimum": 2}
REDUCTIONS = ("sum", "max", "min")


class KernelSyntaxError(ValueError):
    """A kernel spec that cannot be parsed or is not supported."""


@dataclass(frozen=True)
class Spec:
    """A parsed kernel: ``out[out_vars] := reduce over red_vars of body``."""
    text: str
    out: str
    out_vars: tuple
    body: tuple
    reduce: str
    finalizer: str | None


_TOKEN = re.compile(r"\s*(?:(\d+\.\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|\d+(?:[eE][-+]?\d+)?)"
                    r"|([A-Za-z_][A-Za-z_0-9]*)|(:=|\|>|\*\*|[-+*/()\[\],]))")


def tokenize(text):
    pos, toks = 0, []
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise KernelSyntaxError(f"tapestry.kernel: cannot read {text[pos:].strip()!r} "
                                    f"in {text!r}.")
        num, name, op = m.groups()
        toks.append(("num", num) if num else ("name", name) if name else ("op", op))
        pos = m.end()
    toks.append(("end", None))
    return toks


class _Parser:
    def __init__(self, text):
        self.text = text
        self.toks = tokenize(text)
        self.i = 0

    def peek(self, value=None):
        kind, v = self.toks[self.i]
        return v == value if value is not None else (kind, v)

    def take(self, value=None):
        kind, v = self.toks[self.i]
        if value is not None and v != value:
            self.fail(f"expected {value!r} but found {v or 'the end'!r}")
        self.i += 1
        return kind, v

    def fail(self, msg):
        raise KernelSyntaxError(f"tapestry.kernel: {msg} in {self.text!r}.")

    # --- the statement ---------------------------------------------------------
    def spec(self):
        reduce = "sum"
        if self.peek("("):
            self.take("(")
            reduce = self.take()[1]
            if reduce not in REDUCTIONS:
                self.fail(f"unknown reduction {reduce!r} (choose from {REDUCTIONS})")
            self.take(")")
        kind, out = self.take()
        if kind != "name":
            self.fail("the left side must be an output like y[i,j]")
        self.take("[")
        out_vars = []
        while not self.peek("]"):
            kind, v = self.take()
            if kind != "name" or not (self.peek(",") or self.peek("]")):
                self.fail("the left side takes plain indices only (y[i,j]); an index "
                          "expression on the left side is not supported")
            if v in out_vars:
                self.fail(f"index {v!r} repeats on the left side")
            out_vars.append(v)
            if self.peek(","):
                self.take(",")
        self.take("]")
        self.take(":=")
        body = self.expr()
        finalizer = None
        if self.peek("|>"):
            self.take("|>")
            kind, finalizer = self.take()
            if FUNCTIONS.get(finalizer) != 1:
                self.fail(f"the finalizer after |> must be a one-argument function "
                          f"({', '.join(f for f, n in FUNCTIONS.items() if n == 1)})")
        if self.peek()[0] != "end":
            self.fail(f"unexpected {self.peek()[1]!r}")
        return Spec(self.text, out, tuple(out_vars), body, reduce, finalizer)

    # --- expressions -------------------------------------------------------------
    def expr(self):
        a = self.term()
        while self.peek("+") or self.peek("-"):
            op = self.take()[1]
            a = ("bin", op, a, self.term())
        return a

    def term(self):
        a = self.unary()
        while self.peek("*") or self.peek("/"):
            op = self.take()[1]
            a = ("bin", op, a, self.unary())
        return a

    def unary(self):
        if self.peek("-"):
            self.take()
            return ("bin", "*", ("num", -1.0), self.unary())
        if self.peek("+"):
            self.take()
            return self.unary()
        a = self.atom()
        if self.peek("**"):
            self.take()
            return ("bin", "**", a, self.unary())
        return a

    def atom(self):
        kind, v = self.take()
        if kind == "num":
            return ("num", float(v))
        if v == "(":
            a = self.expr()
            self.take(")")
            return a
        if kind != "name":
            self.fail(f"unexpected {v or 'end'!r}")
        if self.peek("["):
            self.take("[")
            idx = []
            while not self.peek("]"):
                idx.append(self.affine(v))
                if self.peek(","):
                    self.take(",")
            self.take("]")
            if v.startswith("_"):
                self.fail(f"input names may not start with '_' ({v!r} is reserved)")
            return ("ref", v, tuple(idx))
        if self.peek("("):
            arity = FUNCTIONS.get(v)
            if arity is None:
                self.fail(f"unknown function {v!r} (known: {', '.join(FUNCTIONS)})")
            self.take("(")
            args = [self.expr()]
            while self.peek(","):
                self.take(",")
                args.append(self.expr())
            self.take(")")
            if len(args) != arity:
                self.fail(f"{v} takes {arity} argument(s), got {len(args)}")
            return ("call", v, tuple(args))
        self.fail(f"{v!r} needs indices (write {v}[i] for an input)")

    def affine(self, array):
        """One index of ``array``: an integer combination of indices plus a constant."""
        terms, const = {}, 0
        sign = 1
        if self.peek("-"):
            self.take()
            sign = -1
        while True:
            kind, v = self.take()
            coef = 1
            if kind == "num" and self.peek("*"):
                self.take()
                coef, (kind, v) = self._int(v, array), self.take()
            if kind == "name" and not (self.peek("[") or self.peek("(") or self.peek("*")
                                       or self.peek("/") or self.peek("**")):
                terms[v] = terms.get(v, 0) + sign * coef
            elif kind == "num" and not (self.peek("*") or self.peek("/") or self.peek("**")):
                const += sign * self._int(v, array)
            else:
                self.fail(f"the index of {array} must be affine, like i, i+a, i-1 or "
                          f"2*i+a (a non-affine shift is not supported)")
            if self.peek("+") or self.peek("-"):
                sign = 1 if self.take()[1] == "+" else -1
                continue
            if not (self.peek(",") or self.peek("]")):
                self.fail(f"the index of {array} must be affine, like i, i+a, i-1 or "
                          f"2*i+a (a non-affine shift is not supported)")
            break
        terms = tuple(sorted((k, c) for k, c in terms.items() if c != 0))
        if not terms:
            self.fail(f"an index of {array} is a constant; slice the input before "
                      "passing it instead")
        return (terms, const)

    def _int(self, v, array):
        if not re.fullmatch(r"\d+", v):
            self.fail(f"index offsets of {array} must be integers, got {v}")
        return int(v)


def parse(text):
    """Parse a kernel spec into a :class:`Spec`."""
    if not isinstance(text, str):
        raise TypeError("tapestry.kernel: the spec must be a string like "
                        "'y[i,j] := w[k,i]*x[k,j]'.")
    return _Parser(text).spec()


# --- small tree utilities -------------------------------------------------------------
def walk(e):
    """Every node of the tree, parents first."""
    yield e
    if e[0] == "call":
        for a in e[2]:
            yield from walk(a)
    elif e[0] == "bin":
        yield from walk(e[2])
        yield from walk(e[3])


def refs(e):
    """The distinct ``('ref', ...)`` nodes of ``e``, in order of first appearance."""
    return list(dict.fromkeys(n for n in walk(e) if n[0] == "ref"))


def index_vars(e):
    """Index variables used by ``e``, in order of first appearance."""
    out = []
    for r in refs(e):
        for terms, _ in r[2]:
            for v, _ in terms:
                if v not in out:
                    out.append(v)
    return out


def is_plain(affine):
    terms, const = affine
    return const == 0 and len(terms) == 1 and terms[0][1] == 1


def affine_str(a):
    terms, const = a
    s = ""
    for v, c in terms:
        s += ("+" if c > 0 and s else "-" if c < 0 else "") + (f"{abs(c)}*" if abs(c) != 1 else "") + v
    if const:
        s += f"{'+' if const > 0 else '-'}{abs(const)}"
    return s


def to_str(e):
    """Readable form of an expression tree (used by ``explain``)."""
    k = e[0]
    if k == "num":
        v = e[1]
        return str(int(v)) if v == int(v) else repr(v)
    if k == "ref":
        return f"{e[1]}[{','.join(affine_str(a) for a in e[2])}]"
    if k == "call":
        return f"{e[1]}({', '.join(to_str(a) for a in e[2])})"
    return f"({to_str(e[2])} {e[1]} {to_str(e[3])})"
