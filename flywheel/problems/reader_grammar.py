"""The reader's grammar: every way the reader may read a token stream (reader_lexer), as one declarative
Lark grammar parsed by Earley with explicit ambiguity, so every parse is enumerated (reader_meaning.py
gives each parse its value and reader.py keys a text only when all parses agree).

Two tiers: symbols (+ - * / ^, brackets) bind by the usual precedence; word operators ("plus", "times",
"divided by") join symbol expressions and are read BOTH by precedence and left to right (spoken
arithmetic is read either way: where the two differ, there is no key). Phrases ("the sum of", "a third
of", "15% of", "3 squared") are operands; frames ("What is", "= ?", "Solve for x:") wrap the question."""

from __future__ import annotations

from lark import Lark
from lark.lexer import Lexer

GRAMMAR = r"""
%declare NUM TSLASH PLUSS DASH STAR SLASH CARET LP RP COMMA EQ PCT SEP COLON BAR UNIT IDIOM FRAC1 FRACN
%declare DIVBY MORETHAN LESSTHAN DP SF SQRT CBRT ROOT2 ROOT3 POINT FUNC VAR PLUS AND ADD ADDED SUM MINUS
%declare SUBTRACT SUBTRACTED LESS DIFFERENCE TAKE AWAY FROM MORE TIMES MULTIPLY MULTIPLIED PRODUCT BY
%declare DIVIDED DIVIDE OVER INTO QUOTIENT OF THAN TO POWER RAISED SQUARED CUBED SQUARE CUBE ROOT TWICE
%declare DOUBLE DOUBLED TRIPLE TRIPLED HALVED HALVE PERCENT WHAT IS EQUALS A HOW MUCH MANY REMAINDER MOD
%declare WHEN MEAN MEDIAN INCREASE INCREASED DECREASE DECREASED EXCEED CONVERT IF LET FOR NEGATIVE X AT
%declare EACH COST LEFT HAVE REMOVE IT THERE QUARTER NEAREST ROUND ROUNDED WHOLE TENTHW HUNDREDTHW PLACES
%declare DECIMALW OPPOSITE RECIPROCAL ABSOLUTE GO WORTH AS IN NUMBERW THEN GIVEN DOES

start: SEP* _question SEP*
_question: ask | equation_q | functions_q

// ---- frames --------------------------------------------------------------------------------------------
ask: _pre? expr _post?
   | expr IS WHAT
   | _pre? command _after?
_pre: WHAT IS | WHAT IS OF | HOW MUCH IS | OF | WHAT | WHAT NUMBERW IS | IS
_post: EQ | EQ SEP* WHAT | EQUALS | EQUALS WHAT | IS WHAT NUMBERW | EQ SEP* NUMBERW
_after: SEP* WHAT IS LEFT | SEP* WHAT IS SUM

// ---- word tier: read by precedence and left to right -----------------------------------------------------
?expr: wsum | wl2r -> l2r | rev | relative | compare
?wsum: wsum wadd wprod -> wbin | wprod
?wprod: wprod wmul wunit -> wbin | wunit
wl2r: wl2r wop wunit | wunit wop wunit
wop: wadd | wmul
!wadd: PLUS | MINUS | LESS
!wmul: TIMES | DIVBY | OVER
?wunit: sexpr | wunit post -> postfix
!post: SQUARED | CUBED | DOUBLED | TRIPLED | HALVED
?rev: wprod LESSTHAN wprod -> less_than | wprod MORETHAN wprod -> more_than
   | wprod ADDED TO wprod -> more_than | wprod SUBTRACTED FROM wprod -> less_than

// ---- symbol tier: usual precedence ---------------------------------------------------------------------
?sexpr: ssum
?ssum: ssum PLUSS sprod -> add | ssum DASH sprod -> sub | sprod
?sprod: sprod STAR sneg -> mul | sprod (SLASH | TSLASH) sneg -> div | sprod SLASH SLASH sneg -> floordiv
      | sprod PCT sneg -> mod | sprod LP expr RP -> mul | sneg
?sneg: DASH sneg -> neg | NEGATIVE sneg -> neg | spow
?spow: sbase CARET sexp -> pow | satom | implicit
?sbase: satom | DASH satom -> neg
?sexp: satom | DASH satom -> neg
?satom: NUM -> num
      | frac
      | LP expr RP
      | BAR expr BAR -> absolute
      | VAR -> var
      | call
      | quantity
      | phrase
      | satom post -> postfix
frac: NUM TSLASH NUM
implicit: (NUM | frac) factor
?factor: fbase | fbase CARET sexp -> pow
?fbase: VAR -> var | LP expr RP | call
call: FUNC LP expr RP

// ---- quantities: units, money, idioms, fractions and percents in words -----------------------------------
?quantity: NUM UNIT -> amount
        | quantity NUM UNIT -> amount_more
        | quantity AND NUM UNIT -> amount_more
        | count? IDIOM -> idiom
        | count? IDIOM AND A FRAC1 -> idiom_half
        | count? IDIOM AND NUM -> idiom_and
        | FRAC1 A IDIOM -> half_idiom
        | fraction_words
        | NUM AND fraction_words -> mixed
        | percent
        | NUM MANY -> num
count: NUM | A
fraction_words: A FRAC1 -> fw_one | NUM FRAC1 -> fw | NUM FRACN -> fw | FRAC1 -> fw_one
percent: (NUM | frac) (PCT | PERCENT)

// ---- phrases -------------------------------------------------------------------------------------------
?phrase: part OF of_arg -> part_of
      | SUM OF items -> sum | PRODUCT OF items -> product
      | DIFFERENCE (OF | FROM) sexpr AND sexpr -> difference
      | QUOTIENT OF sexpr AND sexpr -> quotient
      | (MEAN OF | MEAN) items -> mean | MEDIAN OF items -> median
      | (SQUARE OF | SQUARE) of_arg -> square | (CUBE OF | CUBE) of_arg -> cube
      | (SQRT | ROOT2) of_arg -> sqrt | (CBRT | ROOT3) of_arg -> cbrt
      | TWICE of_arg -> twice | (DOUBLE | DOUBLE OF) of_arg -> twice | TRIPLE of_arg -> thrice
      | (OPPOSITE OF | NEGATIVE OF) of_arg -> opposite | RECIPROCAL OF of_arg -> reciprocal
      | ABSOLUTE OF of_arg -> absolute
      | REMAINDER (WHEN | OF) sexpr IS? DIVBY sexpr -> remainder
      | sexpr MOD sexpr -> remainder
?part: fraction_words | frac | percent
?of_arg: satom | expr
items: sexpr (COMMA sexpr)* COMMA? AND sexpr

// ---- commands ------------------------------------------------------------------------------------------
?command: ADD sexpr AND sexpr -> c_add | ADD sexpr TO sexpr -> c_add
       | SUBTRACT sexpr FROM sexpr -> c_subtract_from | TAKE sexpr AWAY? FROM sexpr -> c_subtract_from
       | MULTIPLY sexpr (BY | AND) sexpr -> c_multiply | DIVIDE sexpr BY sexpr -> c_divide
       | DIVIDE sexpr INTO sexpr -> c_divide_into
       | (DOUBLE | TWICE) sexpr -> twice | TRIPLE sexpr -> thrice | HALVE sexpr -> c_halve
       | SQUARE sexpr -> square | CUBE sexpr -> cube
       | CONVERT quantity TO UNIT -> convert
       | ROUND sexpr TO rounding -> round | sexpr ROUNDED TO rounding -> round
       | sexpr TO rounding -> round
       | INCREASE sexpr BY sexpr -> increase | DECREASE sexpr BY sexpr -> decrease
rounding: NEAREST NUM -> r_nearest | NEAREST FRAC1 -> r_nearest_frac | NEAREST WHOLE NUMBERW? -> r_whole
        | NUM DP -> r_dp | NUM SF -> r_sf

// ---- relative change, conversions, comparisons -----------------------------------------------------------
?relative: sexpr INCREASED BY sexpr -> increase
        | sexpr (DECREASED BY | LESS) sexpr -> decrease
        | sexpr MORETHAN sexpr -> rel_more | sexpr LESSTHAN sexpr -> rel_less
        | quantity IN UNIT -> convert | quantity (IS | EQ) HOW MANY UNIT -> convert
        | quantity EQ UNIT -> convert | quantity EQ HOW MANY UNIT -> convert
        | HOW MANY UNIT (IS | IN | IS IN | IS THERE IN | EQ) quantity -> convert_r
        | quantity TO UNIT -> convert
        | WHAT PERCENT OF sexpr IS sexpr -> pct_of_r | sexpr IS WHAT PERCENT OF sexpr -> pct_of
        | WHAT PERCENT IS sexpr OF sexpr -> pct_of
        | NUM AT quantity EACH -> at_each | NUM AT quantity -> at_each
?compare: HOW MUCH MORE IS sexpr THAN sexpr -> cmp_more | HOW MUCH LESS IS sexpr THAN sexpr -> cmp_less
       | BY HOW MUCH DOES? sexpr EXCEED sexpr -> cmp_more | sexpr IS HOW MUCH MORE THAN sexpr -> cmp_more
       | BY HOW MUCH IS sexpr MORE THAN sexpr -> cmp_more | BY HOW MUCH IS sexpr LESSTHAN sexpr -> cmp_less
       | sexpr IS HOW MANY TIMES (AS MORE AS)? sexpr -> cmp_times
       | HOW MANY TIMES (AS MORE AS)? sexpr IS sexpr -> cmp_times_r

// ---- equations and functions ---------------------------------------------------------------------------
equation_q: _eq_pre? equation _eq_post?
          | equation SEP+ WHAT IS VAR
          | (IF | GIVEN) equation COMMA? (WHAT IS | THEN)? VAR (EQ | IS)?
          | WHAT IS VAR (IF | WHEN) equation
equation: expr EQ expr | expr EQUALS expr
_eq_pre: FOR VAR COLON? | COLON | VAR COLON
_eq_post: FOR VAR | COMMA VAR EQ

functions_q: (LET | IF | GIVEN)? fdefs (SEP | COMMA)+ _pre? call _post?
           | _pre? call (IF | WHEN | GIVEN) fdefs
fdefs: fdef (AND fdef | COMMA fdef)*
fdef: FUNC LP VAR RP EQ expr
"""


class _Tokens(Lexer):
    """The lexer is reader_lexer: the parser receives its tokens as they are."""

    def __init__(self, lexer_conf) -> None:
        pass

    def lex(self, data):  # noqa: ANN001, ANN201 (lark's interface)
        yield from data


_PARSER: Lark | None = None


def parser() -> Lark:
    """The Earley parser, built once on first use."""
    global _PARSER
    if _PARSER is None:
        _PARSER = Lark(GRAMMAR, parser="earley", lexer=_Tokens, ambiguity="explicit")
    return _PARSER
