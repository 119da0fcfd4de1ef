"""Parse string filters into unbound expressions (a hand-written recursive-descent parser).

Grammar (keywords are case-insensitive)::

    filter     := or_expr EOF
    or_expr    := and_expr (OR and_expr)*
    and_expr   := not_expr (AND not_expr)*
    not_expr   := NOT not_expr | '(' or_expr ')' | TRUE | FALSE | predicate
    predicate  := column IS [NOT] (NULL | NAN)
                | column [NOT] IN '(' literal (',' literal)* ')'
                | column [NOT] BETWEEN literal AND literal
                | column [NOT] LIKE string
                | column cmp literal | literal cmp column
    cmp        := '=' | '==' | '!=' | '<>' | '<' | '<=' | '>' | '>='
    column     := name ('.' name)*          name: bare, `back-quoted` or "double-quoted"
    literal    := ['-' | '+'] number | 'string' | X'hex' | TRUE | FALSE

Numbers with a fraction or exponent are :class:`~decimal.Decimal` (exact); the binder converts them to
the column's type. ``x BETWEEN a AND b`` is ``x >= a and x <= b``. ``LIKE 'abc%'`` is ``starts_with``
(``\\%``, ``\\_`` and ``\\\\`` escape); a pattern without wildcards is ``=``; other patterns are rejected.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, NoReturn

from ..errors import ExpressionError
from .tree import (
    FALSE,
    TRUE,
    Expression,
    Op,
    UnboundPredicate,
    and_,
    not_,
    or_,
)

_KEYWORDS = frozenset({"and", "or", "not", "in", "is", "null", "nan", "between", "like", "true", "false"})
_COMPARISONS = {"=": Op.EQ, "==": Op.EQ, "!=": Op.NOT_EQ, "<>": Op.NOT_EQ}
_COMPARISONS |= {"<": Op.LT, "<=": Op.LT_EQ, ">": Op.GT, ">=": Op.GT_EQ}
_TOKEN = re.compile(
    r"""(?P<ws>\s+)
      | (?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?(?![A-Za-z_0-9]))
      | (?P<hex>[xX]'(?P<hexdigits>[^']*)')
      | (?P<string>'(?:[^']|'')*')
      | (?P<bquote>`(?:[^`]|``)*`)
      | (?P<dquote>"(?:[^"]|"")*")
      | (?P<word>[A-Za-z_][A-Za-z0-9_$]*)
      | (?P<op><=|>=|<>|!=|==|[=<>(),.+-])
    """,
    re.VERBOSE,
)


@dataclass(frozen=True)
class Token:
    kind: str  # number, string, hex, ident, keyword, op, end
    text: str
    value: Any
    pos: int


def _tokenize(source: str) -> list[Token]:
    tokens: list[Token] = []
    pos = 0
    while pos < len(source):
        m = _TOKEN.match(source, pos)
        if m is None:
            quote = source[pos]
            if quote in "'`\"":
                _fail(source, pos, source[pos:], f"unterminated {quote}-quoted text")
            _fail(source, pos, source[pos], "unexpected character")
        kind = m.lastgroup if m.lastgroup != "hexdigits" else "hex"
        text = m.group()
        if kind == "number":
            value: Any = Decimal(text) if any(c in text for c in ".eE") else int(text)
            tokens.append(Token("number", text, value, pos))
        elif kind == "hex":
            digits = m.group("hexdigits")
            try:
                tokens.append(Token("hex", text, bytes.fromhex(digits), pos))
            except ValueError:
                _fail(source, pos, text, "invalid hex digits in binary literal")
        elif kind == "string":
            tokens.append(Token("string", text, text[1:-1].replace("''", "'"), pos))
        elif kind in ("bquote", "dquote"):
            quote = text[0]
            name = text[1:-1].replace(quote * 2, quote)
            if not name:
                _fail(source, pos, text, "empty quoted identifier")
            tokens.append(Token("ident", text, name, pos))
        elif kind == "word":
            lower = text.lower()
            if lower in _KEYWORDS:
                tokens.append(Token("keyword", text, lower, pos))
            else:
                tokens.append(Token("ident", text, text, pos))
        elif kind == "op":
            tokens.append(Token("op", text, text, pos))
        pos = m.end()
    tokens.append(Token("end", "", None, len(source)))
    return tokens


def _fail(source: str, pos: int, near: str, message: str) -> NoReturn:
    shown = "end of input" if not near else repr(near)
    raise ExpressionError(f"{message} at position {pos} near {shown}\n  {source}\n  {' ' * pos}^")


def parse(source: str) -> Expression:
    """Parse a filter string such as ``"ts >= '2024-01-01' and id in (1, 2) and name is not null"``."""
    if not isinstance(source, str):
        raise ExpressionError(f"a filter string is expected, got {type(source).__name__}")
    if not source.strip():
        raise ExpressionError("an empty filter string: use 'true' to match every row")
    return _Parser(source).parse()


class _Parser:
    def __init__(self, source: str) -> None:
        self.source = source
        self.tokens = _tokenize(source)
        self.i = 0

    # -- token helpers ------------------------------------------------------------------------------

    @property
    def tok(self) -> Token:
        return self.tokens[self.i]

    def peek(self, ahead: int = 1) -> Token:
        return self.tokens[min(self.i + ahead, len(self.tokens) - 1)]

    def advance(self) -> Token:
        tok = self.tok
        self.i = min(self.i + 1, len(self.tokens) - 1)
        return tok

    def is_kw(self, *words: str, tok: Token | None = None) -> bool:
        t = tok or self.tok
        return t.kind == "keyword" and t.value in words

    def is_op(self, *ops: str, tok: Token | None = None) -> bool:
        t = tok or self.tok
        return t.kind == "op" and t.value in ops

    def expect_kw(self, word: str) -> None:
        if not self.is_kw(word):
            self.fail(f"expected {word.upper()}")
        self.advance()

    def expect_op(self, op: str) -> None:
        if not self.is_op(op):
            self.fail(f"expected {op!r}")
        self.advance()

    def fail(self, message: str, tok: Token | None = None) -> NoReturn:
        t = tok or self.tok
        _fail(self.source, t.pos, t.text, message)

    # -- grammar ------------------------------------------------------------------------------------

    def parse(self) -> Expression:
        expr = self.or_expr()
        if self.tok.kind != "end":
            self.fail("expected AND, OR or the end of the filter")
        return expr

    def or_expr(self) -> Expression:
        expr = self.and_expr()
        while self.is_kw("or"):
            self.advance()
            expr = or_(expr, self.and_expr())
        return expr

    def and_expr(self) -> Expression:
        expr = self.not_expr()
        while self.is_kw("and"):
            self.advance()
            expr = and_(expr, self.not_expr())
        return expr

    def not_expr(self) -> Expression:
        if self.is_kw("not"):
            self.advance()
            return not_(self.not_expr())
        if self.is_op("("):
            self.advance()
            expr = self.or_expr()
            self.expect_op(")")
            return expr
        if self.is_kw("true", "false") and not self._comparison_follows(1):
            return TRUE if self.advance().value == "true" else FALSE
        return self.predicate()

    def _comparison_follows(self, ahead: int) -> bool:
        t = self.peek(ahead)
        return t.kind == "op" and t.value in _COMPARISONS

    def predicate(self) -> Expression:
        if self.tok.kind == "ident":
            return self.column_predicate(self.column())
        start = self.tok
        if start.kind in ("number", "string", "hex", "keyword") or self.is_op("-", "+"):
            if self.is_kw("null"):
                self.fail("NULL cannot be compared: write 'column IS NULL'")
            if start.kind == "keyword" and not self.is_kw("true", "false"):
                self.fail("expected a column name (quote it with `...` if it is a keyword)")
            value = self.literal()
            if not self._comparison_follows(0):
                self.fail("expected a comparison operator after a literal")
            op = _COMPARISONS[self.advance().value]
            if self.tok.kind != "ident":
                self.fail("expected a column name: a literal must be compared with a column")
            return UnboundPredicate(op.flip(), self.column(), (value,))
        return self.fail("expected a column name, NOT or '('")

    def column(self) -> str:
        parts = [self.advance().value]
        while self.is_op(".") and self.peek().kind == "ident":
            self.advance()
            parts.append(self.advance().value)
        if self.is_op("."):
            self.fail("expected a field name after '.'", self.peek())
        return ".".join(parts)

    def column_predicate(self, name: str) -> Expression:
        if self.is_kw("is"):
            self.advance()
            negated = self.is_kw("not")
            if negated:
                self.advance()
            if self.is_kw("null"):
                self.advance()
                return UnboundPredicate(Op.NOT_NULL if negated else Op.IS_NULL, name)
            if self.is_kw("nan"):
                self.advance()
                return UnboundPredicate(Op.NOT_NAN if negated else Op.IS_NAN, name)
            return self.fail("expected NULL or NAN after IS")
        negated = False
        if self.is_kw("not") and self.is_kw("in", "between", "like", tok=self.peek()):
            self.advance()
            negated = True
        if self.is_kw("in"):
            self.advance()
            return UnboundPredicate(Op.NOT_IN if negated else Op.IN, name, self.literal_list())
        if self.is_kw("between"):
            self.advance()
            low = self.literal()
            self.expect_kw("and")
            high = self.literal()
            expr = and_(UnboundPredicate(Op.GT_EQ, name, (low,)), UnboundPredicate(Op.LT_EQ, name, (high,)))
            return not_(expr) if negated else expr
        if self.is_kw("like"):
            self.advance()
            return self.like(name, negated)
        if self.tok.kind == "op" and self.tok.value in _COMPARISONS:
            op = _COMPARISONS[self.advance().value]
            if self.is_kw("null"):
                self.fail("comparison with NULL never matches: write 'column IS NULL' or 'IS NOT NULL'")
            return UnboundPredicate(op, name, (self.literal(),))
        return self.fail("expected a comparison, IS, IN, BETWEEN or LIKE after the column name")

    def literal_list(self) -> tuple[Any, ...]:
        self.expect_op("(")
        if self.is_op(")"):
            self.fail("an IN list needs at least one value")
        values = [self.literal()]
        while self.is_op(","):
            self.advance()
            values.append(self.literal())
        self.expect_op(")")
        return tuple(values)

    def literal(self) -> Any:
        tok = self.tok
        if self.is_op("-", "+"):
            self.advance()
            if self.tok.kind != "number":
                self.fail(f"expected a number after {tok.text!r}")
            value = self.advance().value
            if tok.value == "+":
                return value
            return value.copy_negate() if isinstance(value, Decimal) else -value  # exact: no context rounding
        if tok.kind in ("number", "string", "hex"):
            return self.advance().value
        if self.is_kw("true", "false"):
            return self.advance().value == "true"
        if self.is_kw("null"):
            self.fail("NULL is not a value here: use IS NULL / IS NOT NULL")
        if self.is_kw("nan"):
            self.fail("NaN is not a value here: use IS NAN / IS NOT NAN")
        return self.fail("expected a literal (number, 'string', X'hex', true or false)")

    def like(self, name: str, negated: bool) -> Expression:
        tok = self.tok
        if tok.kind != "string":
            self.fail("expected a 'pattern' string after LIKE")
        self.advance()
        prefix, wildcard = _like_prefix(tok.value, lambda msg: self.fail(msg, tok))
        if wildcard:
            return UnboundPredicate(Op.NOT_STARTS_WITH if negated else Op.STARTS_WITH, name, (prefix,))
        return UnboundPredicate(Op.NOT_EQ if negated else Op.EQ, name, (prefix,))


def _like_prefix(pattern: str, fail: Any) -> tuple[str, bool]:
    """The literal prefix of a LIKE pattern and whether it ends with ``%``; other wildcards fail."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            if i + 1 == len(pattern):
                fail("LIKE pattern ends with an escape character")
            out.append(pattern[i + 1])
            i += 2
            continue
        if c == "%":
            if i + 1 != len(pattern):
                fail(f"unsupported LIKE pattern {pattern!r}: only 'prefix%' (starts with) is supported")
            return "".join(out), True
        if c == "_":
            fail(f"unsupported LIKE pattern {pattern!r}: '_' wildcards are not supported (escape as \\_)")
        out.append(c)
        i += 1
    return "".join(out), False
