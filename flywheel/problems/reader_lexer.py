"""The reader's lexer: normalize a text (case, unicode, LaTeX, frames like "Q: ... A:") and turn it into
the token stream the grammar parses. Every word is a number, a unit, a grammar word or a filler word
(reader_lexicon.FILLER, the only words dropped); anything else raises Refuse (no key).

Numbers become NUM tokens whose value is an exact Fraction written as a string ("3/4"); a tight digit
fraction "3/4" is NUM TSLASH NUM (the grammar reads it as one number or as a division); a mixed number
("2 7/8", "2\u215e", "3 \\frac{1}{4}") is one NUM. Units and money are UNIT tokens "dim:factor"."""

from __future__ import annotations

import re
from fractions import Fraction

from lark import Token
from text_to_num import text2num

from galahad.flywheel.problems import reader_lexicon as lx

MAX_TOKENS = 64
MAX_DIGITS = 30
MAX_DEPTH = 5  # brackets: the parse forest's readings grow with each level of nesting
MAX_PHRASES = 5  # "the sum of", "the product of", "of", ... in one text


class Refuse(Exception):
    """The text cannot be read soundly: no key."""


_GLYPHS = {"\u00d7": " * ", "\u22c5": " * ", "\u00b7": " * ", "\u2217": " * ", "\u00f7": " \u00f7 ",
           "\u2212": "-", "\u2013": "-", "\u2014": "-", "\u00b2": "^2", "\u00b3": "^3", "\u221a": " sqrtsym ",
           "\u221b": " cbrtsym ", "\u00a2": " cents",
           "\u2019": "'", "\u201c": "", "\u201d": "", "**": "^", "\u2260": " != ", "\u00a0": " ",
           "\\times": " * ", "\\cdot": " * ", "\\div": " \u00f7 ", "\\left": "", "\\right": "", "\\,": "",
           "\\bmod": " mod ", "\\%": "%", "\\$": "$", "\\;": " ", "\\!": "", "\\ ": " "}
_VULGAR = {"\u00bd": "1/2", "\u2153": "1/3", "\u2154": "2/3", "\u00bc": "1/4", "\u00be": "3/4", "\u2155": "1/5",
           "\u2156": "2/5", "\u2157": "3/5", "\u2158": "4/5", "\u2159": "1/6", "\u215a": "5/6", "\u215b": "1/8",
           "\u215c": "3/8", "\u215d": "5/8", "\u215e": "7/8"}
_FRAC = re.compile(r"\\[dt]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}")
_FRAC_INT = re.compile(r"\\[dt]?frac\s*(?:\{\s*(\d+)\s*\}|(\d))\s*(?:\{\s*(\d+)\s*\}|(\d))")
_MATH = re.compile(r"\$([^$]*)\$(?!\s*\d)")
_SQRT = re.compile(r"\\sqrt\s*(?:\[\s*(\d+)\s*\])?\s*\{([^{}]*)\}")
_ROOTS = {"2": "sqrt", "3": "cbrt"}
_PRE = re.compile(r"^\s*(?:q|question|quick question|problem)\s*:\s*")
_POST = re.compile(r"\s*\ba\s*:\s*$")
_TOKEN = re.compile(r"""
    (?P<mixed>(?<![/\d.^])\d+\s+\d+/\d+(?![\d/.^]|\s*[\^*/]))
  | (?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?(?!\d|,\d)|\d+\.\d+|\d+|(?<![\w.])\.\d+)
  | (?P<word>[a-z]+(?:'[a-z]+)?)
  | (?P<sym>\u00f7|!=|[-+*/^(),=%$?.;:!|])
  | (?P<space>\s+)
""", re.X)
_SYMS = {"+": "PLUSS", "-": "DASH", "*": "STAR", "/": "SLASH", "\u00f7": "SLASH", "^": "CARET", "(": "LP",
         ")": "RP", ",": "COMMA", "=": "EQ", "%": "PCT", "?": "SEP", ".": "SEP", ";": "SEP", ":": "COLON",
         "|": "BAR"}
_BILLS = {1: "one", 2: "two", 5: "five", 10: "ten", 20: "twenty", 50: "fifty", 100: "hundred"}
_BILL_WORDS = {f"billsof{w}": v for v, w in _BILLS.items()}


def _bills(m: re.Match) -> str:
    n = m.group(1) or m.group(2)
    v = int(n) if n.isdigit() else lx.SMALL.get(n, 0) if n != "hundred" else 100
    return f" billsof{_BILLS[v]} " if v in _BILLS else " badbills "


def _clock(m: re.Match) -> str:
    """'10 pm', '6:30 a.m.': ' clockat <minutes after midnight> ' (an hour past 12: an unknown word, no key)."""
    h, mins = int(m.group(1)), int(m.group(2) or 0)
    if not 1 <= h <= 12:
        return " badclock "
    return f" clockat {(h % 12 + (12 if m.group(3) == 'p' else 0)) * 60 + mins} "


def _from_bill(m: re.Match) -> str:
    return f" from dollarsign {lx.SMALL.get(m.group(1)) or 100} "


def _clock24(m: re.Match) -> str:
    h, mins = m.group(1), int(m.group(2))
    if int(h) > 23:
        return " badclock "
    bare = len(h) == 1 or int(h) <= 12 and not h.startswith("0")
    return f" {'clockbare' if bare else 'clockat'} {int(h) * 60 + mins} "


_PHRASES = [(re.compile(p), r) for p, r in [
    (r"\b(more|less|fewer|bigger|larger|greater|smaller) then\b(?=\s*[\d$-])", r" \1 than "),  # a typo
    (r"^\s*(?:please )?(?:state|give|find|solve|compute|calculate|evaluate|answer)(?: the final answer to)? the"
     r" following(?: [a-z]+){0,2}\s*:", " "),
    (r"\bmultiplicative inverse\b", " reciprocal "), (r"\barithmetic (mean|average)\b", r" \1 "),
    (r"\b(?:to|into) an? (?:improper |mixed )?(?:fraction|decimal)\b", " "), (r"\(\s*integer division\s*\)", " "),
    (r"\babs\s*(?=\()", " absf "),
    (r"\bgive only the (?:result|answer|final answer)(?: as your final answer)?\s*\.?", " . "),
    (r"\b(?:raised )?to the (negative )?(zeroth|first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|\d+(?:st|nd|rd|th))"
     r"(?: power)?\b",
     lambda m: f" poww {'-' if m.group(1) else ''}{lx.ORDINAL.get(m.group(2)) or m.group(2)[:-2]} "),
    # a ratio with a colon is a number only where the text asks for one ("4:12 as a fraction", "the ratio 4:12"):
    # a bare "4:12" is also a clock time
    (r"\bratio (?:of )?(\d+(?:\.\d+)?)\s*:\s*(\d+(?:\.\d+)?)(?![\d.:])", r" ratio of \1 to \2 "),
    (r"(?<![\d.:])(\d+(?:\.\d+)?)\s*:\s*(\d+(?:\.\d+)?)(?=\s+(?:simplified\s+)?as an? (?:single |simplified |reduced )?(?:fraction|number|decimal)\b)",
     r" ratio of \1 to \2 "),
    (r"\bas an? (?:simplified |reduced |common |proper |improper )?(?:fraction|decimal|whole number|number)\b", " "),
    (r"\bin (?:its )?(?:simplest|lowest) (?:form|terms)\b", " "), (r"\bwhat'?s\b", "what is"),
    (r"\b(\d+)\s*(?:to the)\s*(\d+)(?:st|nd|rd|th)\b", r"\1 poww \2"), (r"\bout of\b", " divby "), (r"\braised to(?: the power of| the power)?\b", " poww "),
    (r"\bto the (?:power of|power)\b", " poww "), (r"\bmultiplied by\b", " mulby "),
    (r"\bdivided by\b", " divby "), (r"\bsquare root of\b", " sqrt "), (r"\bcube root of\b", " cbrt "),
    (r"\bmore than\b", " morethan "), (r"\bless than\b", " lessthan "), (r"\bfewer than\b", " lessthan "),
    (r"\bsqrt\s*(?=\()", " sqrtp "), (r"\bcbrt\s*(?=\()", " cbrtp "),
    (r"\b(?:as|in|into|to) an? (?:percent|percentage)\b", " aspercent "),
(r"\bd\.p\.?|\bdp\b", " dp "), (r"\bs\.f\.?|\bsig\.? figs?\b|\bsignificant figures?\b", " sf "),
    (r"\bdecimal places?\b", " dp "), (r"\bon (?:the|a) number line\b", " "),
    (r"\b(\d{1,2})(?::([0-5]\d))?\s*([ap])\.?\s?m\b\.?", _clock), (r"\bnoon\b", " clockat 720 "),
    (r"\bmidnight\b", " clockat 0 "),
    # a clock time without am/pm: the 24-hour clock ("17:30", "08:15"); "9:40" (12-hour or 24-hour?) only where
    # the times run forward (checked in tokens())
    (r"(?<![\d:.,$])(\d{1,2}):([0-5]\d)(?![\d:])", _clock24),
    (r"\b(?:time|how long) between\b", " how long between "),
    (r"\bsales tax\b", "tax"), (r"\bdiff\b", " difference "), (r"\bfollowed by\b", " then "),
    # "20% off, then another 10% off": the second discount is a discount like the first
    (r"\b(?:another|an extra|an additional|a further)\s+(?=[\d.]+\s*(?:%|percent))", " "),
    (r"\bhalf an? (thousand|million|billion|percent)\b", r" 0.5 \1 "), (r"\bper ?cent\b", " percent "),
    (r"\bto the (?:negative|minus) (\d+)\b(?!\s*(?:st|nd|rd|th)\b)", r" poww -\1 "), (r"\badd up\b(?! to)", " add "),
    (r"\b(?:to|into|in|as) (?:%|percent|percentage)\s*(?=[?.!]?\s*$)", " aspercent "),
    # "change from a twenty": a bill of that many dollars
    (r"\bfrom an? (five|ten|twenty|fifty|hundred)\b(?!\s*(?:-|dollar|percent|%|bucks|pounds|euros))", _from_bill),
    (r"\bleft over\b", " remainder "), (r"\btime elapsed\b", " how long "), (r"\bhourly\b", " per hour "),
    (r"\bmost (?:common|frequent) (?:number|value)\b", " mode "),
    # temperatures: "68°F", "68 degrees fahrenheit", "in °C", "100 C in F"
    (r"(?:\u00b0\s*|\bdegrees?\s+)(f|c)(?:ahrenheit|elsius)?\b", lambda m: f" deg{m.group(1)} "),
    (r"\bdegrees?\s+(?=fahrenheit|celsius|centigrade)", " "),
    (r"(deg[fc]\s+(?:in|to|into)\s+)(f|c)\s*(?=[?.!]?\s*$)", r"\1 deg\2 "),
    (r"(?<=\d)\s*(f|c)\s+(in|to|into)\s+(f|c)\s*(?=[?.!]?\s*$)", lambda m: f" deg{m.group(1)} {m.group(2)} deg{m.group(3)} "),
    (r"(?<=\d)\s*(f|c)\s+(in|to|into)\s+(?=fahrenheit|celsius)", lambda m: f" deg{m.group(1)} {m.group(2)} "),
    (r"\b(?:what is|how much is) left (?:when|if|after) (?:you )?divid(?:e|ing)\b", " what is remainder when divide "),
    (r"\bdown to\b", " to "), (r"\bunit price\b", " price per item "), (r"\bsale price\b", " price "),
    (r"\bmore expensive\b", " pricier "), (r"\bless expensive\b", " cheaper "), (r"\bmin\s*(?=\()", " minimum "), (r"\bmin of\b", " minimum of "),
    (r"\bby what amount\b", " by how much "), (r"\bon sale (?:for|at) (?=[\d.]+\s*(?:%|percent) off)", " "),
    (r"\bmarked (down|up)(?: by)?\b", lambda m: " decreased by " if m.group(1) == "down" else " increased by "),
    # "$20 bills", "five-dollar bills", "20-dollar bills": a unit of that many dollars ("how many $5 bills make $85")
    (r"(?:\bdollarsign\s+(\d+)|\b(\d+|[a-z]+)[ -]dollar) bills\b", _bills),
    (r"\b(?:an?\s+)?(\d+|[a-z]+)[ -]dollar bill\b", r" \1 dollars "),
    (r"\bcompared (?:to|with)\b", " than "), (r"\bpct\b", " percent "), (r"\bwhat\s*%", " what percent "),
    (r"(?:^|(?<=[\s(]))%\s*(?=(?:change|increase|decrease)\b)", " percent "), (r"&", " and "),
    (r"\bgoing from\b", " from "), (r"\b(?:positive|absolute) difference\b", " distance "),
    (r"\b(?:per annum|per year|a year|each year|every year|annually|yearly|annual)\b", " peryear "), (r"\bgratuity\b", " tip "),
    # "a $25 purchase", "a $50 shirt": the amount; the noun after it names no number
    (r"\b(?:an?\s+)?((?:dollar|pound|euro)sign\s+[\d.,]*\d)\s+(?:purchase|bill|item|meal|order|check|tab|dinner|lunch"
     r"|breakfast|shirt|jacket|coat|dress|book|toy|game|ticket|sweater|lamp|bike|phone|watch|bag)\b", r" \1 "),
]]


def normalize(text: str) -> str:
    """Casefold and rewrite glyphs, LaTeX and frames into the plain form the tokenizer reads."""
    if any(ord(c) < 32 and c not in "\t\n" or 0xD800 <= ord(c) <= 0xDFFF for c in text):
        raise Refuse("control character")
    t = text.lower().replace("$$", " ").replace("\\(", " ").replace("\\)", " ")
    t = re.sub(r"\\\[|\\\]", " ", t)
    # "$3x + 5 = 20$", "$f(4)$": LaTeX math, not an amount ("$3 + $4" stays money)
    t = _MATH.sub(lambda m: f" {m.group(1)} " if re.search(r"[\\^{=]|\d[a-z]\b|\b[a-z]\(", m.group(1)) else m.group(), t)
    t = re.sub(r"\\text\s*\{([^{}]*)\}", r" \1 ", t)
    t = _FRAC_INT.sub(lambda m: f" {m.group(1) or m.group(2)}/{m.group(3) or m.group(4)} ", t)
    t = re.sub(r"(\d) +(\d+/\d+)", r"\1 \2", t)
    for _ in range(4):
        t = _FRAC.sub(r"((\1)/(\2))", t)
        t = _SQRT.sub(lambda m: f" {_ROOTS.get(m.group(1) or '2', 'unknownroot')}p ({m.group(2)}) ", t)
    for k, v in _GLYPHS.items():
        t = t.replace(k, v)
    # "3/4 ÷ 1/8": a division of fractions ("6 ÷ 2/3" stays read both ways: 9 or 1)
    t = re.sub(r"(?<![\d./^])(?<!\d )(\d+/\d+)\s*\u00f7\s*(\d+/\d+)(?![\d/^.])", " (\\1) \u00f7 (\\2) ", t)
    for k, v in _VULGAR.items():
        t = re.sub(rf"(\d)\s*{k}", rf"\1 {v}", t).replace(k, f" {v} ")
    t = t.replace("{", "(").replace("}", ")")
    if "\\" in t:
        raise Refuse("unknown LaTeX")
    t = re.sub(r"(?<=[a-z]{2})-(?=[a-z]{2})|(?<=\d)-(?=[a-z]{2})", " ", t)
    t = _POST.sub("", _PRE.sub("", t))
    t = re.sub(r"\$(?=\s*[\d.])", " dollarsign ", t)
    t = re.sub(r"(=|\bin|\bto)\s*\$(?=\s*\?)", r"\1 dollars ", t)  # "350\u00a2 = $?": in dollars
    t = re.sub(r"\u00a3(?=\s*[\d.])", " poundsign ", t)
    t = re.sub(r"\u20ac(?=\s*[\d.])", " eurosign ", t)
    t = re.sub(r"(?<=[\d.])\s*\u20ac", " euros ", t)
    for pat, rep in _PHRASES:
        t = pat.sub(rep, t)
    return t


def _num_token(q: Fraction) -> Token:
    if max(q.numerator.bit_length(), q.denominator.bit_length()) > 3.33 * MAX_DIGITS + 8:
        raise Refuse("literal too long")
    return Token("NUM", str(q))


def _digits(s: str) -> Fraction:
    return Fraction(s.replace(",", ""))


def _number_words(words: list[str], i: int) -> tuple[Fraction, int] | None:
    """The longest run of number words at i ("three hundred and five", "a thousand", "zero point seven
    five"): (value, words used), or None."""
    j, run = i, []
    if words[i] == "a" and i + 1 < len(words) and words[i + 1] in lx.SCALES:
        run, j = ["one"], i + 1
    while j < len(words):
        w = words[j]
        if w in lx.SMALL or w in lx.SCALES:
            run.append(w)
        elif w == "and" and run and run[-1] in lx.SCALES and j + 1 < len(words) and words[j + 1] in lx.SMALL:
            run.append(w)
        else:
            break
        j += 1
    if not run or run[-1] == "and":
        return None
    try:
        value = Fraction(int(text2num(" ".join(run), "en")))
    except ValueError as e:
        raise Refuse(str(e)) from None
    if j < len(words) and words[j] == "point":
        digits = []
        while j + 1 + len(digits) < len(words) and lx.SMALL.get(words[j + 1 + len(digits)], 10) < 10:
            digits.append(str(lx.SMALL[words[j + 1 + len(digits)]]))
        if not digits or run[-1] in lx.SCALES:
            raise Refuse("a decimal in words")
        value += Fraction(int("".join(digits)), 10 ** len(digits))
        j += 1 + len(digits)
        if j < len(words) and words[j] in _SCALE_AFTER_DIGITS:  # "two point five million"
            value, j = value * lx.SCALES[words[j]], j + 1
    return value, j - i


def tokens(text: str) -> list[Token]:
    """The token stream of a text (see the module docstring), or raise Refuse."""
    t = normalize(text)
    raw: list[tuple[str, str]] = []
    pos = 0
    while pos < len(t):
        m = _TOKEN.match(t, pos)
        if m is None:
            raise Refuse(f"character {t[pos]!r}")
        pos = m.end()
        kind = m.lastgroup
        if kind != "space":
            raw.append((kind, m.group(), m.start() > 0 and t[m.start() - 1] == " "))
    for a, b in zip(raw, raw[1:], strict=False):
        # bare numbers side by side are a list ("the median of 3 9 1 7 5") only where no other grouping is
        # possible: "9 1/2" (a list item or a mixed number?), "1 000" (a thousands group?)
        if a[0] in ("num", "mixed") and b[0] in ("num", "mixed") and (
                "mixed" in (a[0], b[0]) or re.fullmatch(r"\d{3}", b[1])):
            raise Refuse("numbers side by side: a list, a mixed number or a thousands group")
    for i in range(1, len(raw) - 1):
        # a list of bare numbers followed by an operator ("the mean of 4 8 15 plus 2"): the list's last item or
        # the whole list? ("4, 8, 15 plus 2" is read both ways)
        if raw[i - 1][0] in ("num", "mixed") and raw[i][0] in ("num", "mixed") and raw[i + 1][1] in _AFTER_LIST:
            raise Refuse("an operator after a list of bare numbers")
    out: list[Token] = []
    words = [v for _, v, _ in raw]
    tight = [sp is False for _, _, sp in raw]
    i = 0
    and_count = words.count("and")
    while i < len(raw):
        kind, v, _ = raw[i]
        nxt = raw[i + 1][1] if i + 1 < len(raw) else ""
        if kind == "mixed":
            whole, frac = v.split()
            n, d = frac.split("/")
            if int(d) == 0 or int(n) >= int(d):
                raise Refuse("not a mixed number")
            out.append(_num_token(Fraction(whole) + Fraction(int(n), int(d))))
        elif kind == "num":
            if len(v.replace(",", "").replace(".", "")) > MAX_DIGITS:
                raise Refuse("literal too long")
            if nxt in _SCALE_AFTER_DIGITS and not (i + 2 < len(raw) and raw[i + 2][0] in ("num", "mixed")):
                if i and words[i - 1] in _AFTER_LIST:
                    raise Refuse("'2 + 3 thousand': the sum in thousands or its last term?")
                out.append(_num_token(_digits(v) * lx.SCALES[nxt]))  # "2.5 million", "3 thousand"
                i += 2
                continue
            out.append(_num_token(_digits(v)))
            chain = (i >= 1 and words[i - 1] == "/" and tight[i]) or (
                i + 3 < len(raw) and words[i + 3] == "/" and tight[i + 3])
            if chain and nxt == "/" and tight[i + 1]:
                raise Refuse("1/3/4: a chain of tight slashes")
            if (nxt == "/" and i + 2 < len(raw) and raw[i + 2][0] == "num" and tight[i + 1] and tight[i + 2]
                    and not chain):
                out.append(Token("TSLASH", "/"))
                i += 1
        elif kind == "sym":
            if v == "!" and not (raw[i - 1][0] == "word" if i else False):
                raise Refuse("factorial")
            if v == "!=":
                raise Refuse("inequality")
            if v == "/" and ((i and words[i - 1] in lx.SMALL and tight[i]) or
                             (i + 1 < len(raw) and words[i + 1] in lx.SMALL and tight[i + 1])):
                raise Refuse("a slash touching a word ('two/three')")
            if v == "%" and i + 1 < len(raw) and raw[i + 1][0] in ("num", "mixed"):
                raise Refuse("'17 % 5': a percent or a remainder")
            out.append(Token(_SYMS.get(v, "SEP"), v))
        else:
            got = _number_words(words, i)
            if got is not None:
                value, used = got
                if "and" in words[i:i + used] and and_count > 1:
                    raise Refuse("'and' inside a number word beside a list")
                out.append(_num_token(value))
                i += used
                continue
            out.extend(_word(v, words, i, tight[i]))
        i += 1
    if len(out) > MAX_TOKENS:
        raise Refuse("too many tokens")
    depth = deepest = 0
    for t in out:
        depth += (t.type == "LP") - (t.type == "RP")
        deepest = max(deepest, depth)
    nested = sum(t.type in ("SUM", "PRODUCT", "DIFFERENCE", "QUOTIENT", "MEAN", "MEDIAN", "OF") for t in out)
    if deepest > MAX_DEPTH or nested > MAX_PHRASES:
        raise Refuse("nesting past the bound: every reading of it would be enumerated")
    return _in_context(_dollars(out))


def _word(w: str, words: list[str], i: int, tight: bool) -> list[Token]:
    prev = words[i - 1] if i else ""
    nxt = words[i + 1] if i + 1 < len(words) else ""
    if w in _CURRENCY_SIGNS:
        return [Token("DOLLAR", _CURRENCY_SIGNS[w])]
    if w in _BILL_WORDS:  # "$20 bills", "five-dollar bills": a unit of N dollars
        return [Token("UNIT", f"money:{_BILL_WORDS[w]}")]
    if w == "mulby":  # "multiplied by": the symbol's grammar, its words kept for reader_doubt
        return [Token("STAR", "multiplied by")]
    if w in lx.IDIOMS:
        return [Token("IDIOM", str(lx.IDIOMS[w]))]
    if w in lx.DENOM_ONE and w != "second":
        return [Token("FRAC1", str(lx.DENOM_ONE[w]))]
    if w in lx.DENOM_MANY and w != "seconds":
        if w == "quarters":
            coin = (prev[:1].isdigit() or prev in ("many", "in", "into")) and nxt != "of"  # "3 quarters", not "3 quarters of 100"
            return [Token("UNIT", _unit(w))] if coin else [Token("FRACN", "4")]
        return [Token("FRACN", str(lx.DENOM_MANY[w]))]
    if w in ("poww", "divby", "morethan", "lessthan", "dp", "sf", "sqrt", "cbrt", "root2", "root3", "point"):
        return [Token(w.upper(), w)]
    # a one-letter unit after a number ("5 m"), or asked for at the end ("convert 3.2 km to m", "2.5 km = ? m")
    if w in lx.UNIT and w not in lx.WORDS and (len(w) > 1 or (prev[:1].isdigit() and not tight)
                                                or (prev in ("to", "into", "in", "?") and nxt in ("", "?", "."))):
        return [Token("UNIT", _unit(w))]
    if len(w) == 1 and w not in ("a", "i"):
        if nxt == "(" and w in "fghpq":
            return [Token("FUNC", w)]
        if w == "r" and prev[:1].isdigit() and any(v in _DIVISION for v in words):
            return [Token("REMAINDER", w)]  # "89 ÷ 9 = 9 r ?": remainder notation, not an unknown
        if w == "x" and (prev[:1].isdigit() or prev == ")" or prev in lx.UNIT) and (nxt[:1].isdigit() or (nxt[:1] == "." and nxt[1:2].isdigit())
                                                 or nxt in _CURRENCY_SIGNS):
            if tight:
                raise Refuse("3x4: times or hexadecimal")
            return [Token("STAR", "x")]
        return [Token("VAR", w)]
    if w == "a" and (_a_is_var(words, i) or (any(_a_is_var(words, k) for k, v in enumerate(words) if v == "a")
                                              and (nxt in ("", "?", ".", ":", ",", "be") or prev == "for"))):
        return [Token("VAR", w)]
    if w in lx.WORDS:
        return [Token(lx.WORDS[w], w)]
    if w in lx.FILLER:
        # a command in mid-text ("3x+5=20 find x", "f(x)=3x+2, find f(4)") ends what came before it: dropped,
        # it would join its neighbours ("20 x" read as 20x)
        return [Token("SEP", w)] if w in _COMMANDS and i and words[i - 1] not in (",", ".", ";", ":", "?") else []
    raise Refuse(f"unknown word {w!r}")


_COMMANDS = frozenset("compute calculate evaluate find determine simplify solve work tell show".split())
_SCALE_AFTER_DIGITS = frozenset(("thousand", "million", "billion"))
_DIVISION = frozenset(("\u00f7", "/", "divided", "divide", "div", "into", "over", "by"))
_AFTER_LIST = frozenset("""+ - * / ^ % \u00f7 plus minus times over divided multiplied mulby divby squared cubed
less more lessthan morethan doubled halved tripled take and to by of percent poww mod modulo""".split())
_CURRENCY_SIGNS = {"dollarsign": "money:1", "poundsign": "gbp:1", "eurosign": "eur:1"}


def _a_is_var(words: list[str], i: int) -> bool:
    """'a' next to a symbol or a digit is an unknown ("5*a", "3a + 2", "a = 4"), not the article."""
    prev = words[i - 1] if i else ""
    nxt = words[i + 1] if i + 1 < len(words) else ""
    return prev in ("*", "(", "+", "-", "=") or nxt in ("=", "+", "-", "*", "^", ")") or (
        prev[:1].isdigit() and nxt not in lx.UNIT)  # "$2.40 a pound": the article


def _unit(w: str) -> str:
    dim, f = lx.UNIT[w]
    return f"{dim}:{f}"


def _in_context(out: list[Token]) -> list[Token]:
    """Readings that depend on other tokens of the text: clock times without am/pm must run forward; "what is
    left" beside a division is refused; "$0.25 an egg" (per egg, each egg) is a price each."""
    clocks = [(t.value, Fraction(n.value)) for t, n in zip(out, out[1:], strict=False) if t.type == "CLOCK"]
    if any(kind == "clockbare" for kind, _ in clocks) and any(a[1] >= b[1] for a, b in zip(clocks, clocks[1:], strict=False)):
        raise Refuse("'10:30 to 1:15': the 12-hour or the 24-hour clock?")
    if any(t.type == "LEFT" for t in out) and any(t.type in ("DIVIDE", "DIVBY", "SLASH", "OVER") for t in out):
        raise Refuse("what is left after a division: the remainder or the quotient?")
    for k in range(len(out) - 2):
        if (out[k].type == "UNIT" and out[k].value.split(":")[0] in lx.MONEY
                and out[k + 1].type in ("A", "PER", "EACH") and out[k + 2].type == "ITEMS"):
            out[k + 1:k + 3] = [Token("EACH", "each")]
            break
    return out


def _dollars(toks: list[Token]) -> list[Token]:
    """`$ 4.50` -> `4.50 dollars` (the unit after its number, as words write it)."""
    out: list[Token] = []
    i = 0
    while i < len(toks):
        if toks[i].type == "DOLLAR":
            if i + 1 >= len(toks) or toks[i + 1].type != "NUM":
                raise Refuse("a dollar sign without an amount")
            out += [toks[i + 1], Token("UNIT", toks[i].value)]
            i += 2
            continue
        out.append(toks[i])
        i += 1
    for a, b, c in zip(out, out[1:], out[2:], strict=False):
        if a.type in ("SQRTSYM", "CBRTSYM") and b.type == "NUM" and c.type == "TSLASH":
            raise Refuse("\u221a1/25: the root of the fraction or of its numerator")
    vars_ = {t.value for t in out if t.type == "VAR"}
    if len(vars_) > 1:
        raise Refuse("two unknowns")
    return out
