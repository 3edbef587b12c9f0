"""The reader's closed word lists: filler words (the only words it may skip), number words, fraction words,
idiomatic quantities, units with exact factors, money, and the words that are grammar tokens.

Every word of a text must be in one of these lists, or the text gets no key (reader_lexer.py)."""

from __future__ import annotations

from fractions import Fraction as F

# Words that cannot carry meaning in a math question: dropped before parsing. No word here names an
# operation, a number, a unit or a relation.
FILLER = frozenset("""
please pls kindly compute calculate evaluate find determine work out simplify tell me us show
the value result answer final exactly exact quickly quick question thanks thank you
can could would will you i we just now precisely actually here following expression problem math
write written express expressed simplest form respond reply only
so hey hi okay ok mentally get do obtain solve money new list simplified these calc working worked
""".split())
# "a"/"an"/"what"/"is" are grammar tokens (a dozen, a third; frames), never skipped blindly.

UNITS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
         "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"]
TENS = ["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
SMALL = {w: i for i, w in enumerate(UNITS)} | {w: 20 + 10 * i for i, w in enumerate(TENS)}
SCALES = {"hundred": 100, "thousand": 1000, "million": 10**6, "billion": 10**9}

# denominators in words: singular (after a/one) and plural (after two..)
_ORD = {"half": 2, "third": 3, "quarter": 4, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7,
        "eighth": 8, "ninth": 9, "tenth": 10, "eleventh": 11, "twelfth": 12, "hundredth": 100,
        "thousandth": 1000}
DENOM_ONE = _ORD
DENOM_MANY = {("halves" if w == "half" else w + "s"): d for w, d in _ORD.items()}

# idiomatic quantities: a count of them is count * size
IDIOMS = {"dozen": 12, "dozens": 12, "score": 20, "scores": 20, "gross": 144, "pair": 2, "pairs": 2, "couple": 2}
ORDINAL = {"zeroth": 0, "first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7, "eighth": 8, "ninth": 9,
           "tenth": 10}

# exact unit factors to a base unit per dimension (length: metre, mass: gram, volume: litre, time: second)
_U = {
    "length": {("mm", "millimeter", "millimeters", "millimetre", "millimetres"): F(1, 1000),
               ("cm", "centimeter", "centimeters", "centimetre", "centimetres"): F(1, 100),
               ("m", "meter", "meters", "metre", "metres"): F(1),
               ("km", "kilometer", "kilometers", "kilometre", "kilometres"): F(1000),
               ("inch", "inches"): F(254, 10000), ("ft", "foot", "feet"): F(3048, 10000),
               ("yd", "yard", "yards"): F(9144, 10000), ("mi", "mile", "miles"): F(1609344, 1000)},
    "mass": {("mg", "milligram", "milligrams"): F(1, 1000), ("g", "gram", "grams"): F(1),
             ("kg", "kilogram", "kilograms"): F(1000), ("oz", "ounce", "ounces"): F(28349523125, 10**9),
             ("lb", "lbs", "pound", "pounds"): F(45359237, 10**5)},
    "volume": {("ml", "milliliter", "milliliters", "millilitre", "millilitres"): F(1, 1000),
               ("l", "liter", "liters", "litre", "litres"): F(1),
               ("gallon", "gallons", "gal"): F(3785411784, 10**9), ("quart", "quarts", "qt"): F(3785411784, 4 * 10**9),
               ("pint", "pints", "pt"): F(3785411784, 8 * 10**9), ("cup", "cups"): F(3785411784, 16 * 10**9)},
    "calendar": {("month", "months"): F(1), ("year", "years", "yr", "yrs"): F(12), ("decade", "decades"): F(120)},
    "time": {("s", "sec", "secs", "second", "seconds"): F(1), ("min", "mins", "minute", "minutes"): F(60),
             ("h", "hr", "hrs", "hour", "hours"): F(3600), ("day", "days"): F(86400),
             ("week", "weeks"): F(604800)},
    "money": {("cent", "cents"): F(1, 100), ("dollar", "dollars", "bucks"): F(1),
              ("penny", "pennies"): F(1, 100), ("nickel", "nickels"): F(5, 100), ("dime", "dimes"): F(10, 100),
              ("quarters",): F(25, 100), ("usd",): F(1)},
    # other currencies: their own dimensions, so no amount of one joins or converts to another (no rate is known)
    "gbp": {("gbp",): F(1), ("pence",): F(1, 100)},
    "eur": {("euro", "euros", "eur"): F(1)},
    # temperatures: their own scales, converted by reader_phrases._temperature (an offset, no factor)
    "degf": {("degf", "fahrenheit"): F(1)}, "degc": {("degc", "celsius", "centigrade"): F(1)},
}
UNIT = {w: (dim, f) for dim, table in _U.items() for names, f in table.items() for w in names}
MONEY = ("money", "gbp", "eur")  # the dimensions of _U that are currencies

# countable things bought or shared ("4 pens at $1.25 each", "if 3 tickets cost $36"): an ITEMS token, read only
# where the grammar has a place for a count's noun (a price each, a price of one, a share)
NOUNS = frozenset("""
apple apples orange oranges banana bananas pen pens pencil pencils book books notebook notebooks ticket tickets
shirt shirts toy toys cookie cookies candy candies bottle bottles cans box boxes bag bags egg eggs
muffin muffins sandwich sandwiches card cards stamp stamps marker markers eraser erasers drink drinks coffee
coffees snack snacks sticker stickers donut donuts doughnut doughnuts cupcake cupcakes burger burgers pizza pizzas
magazine magazines balloon balloons flower flowers plant plants chair chairs hat hats sock socks friends person
students kids children meal meals dinner lunch breakfast jacket jackets coat coats dress dresses
game games phone phones bike bikes watch watches lamp lamps sweater sweaters
bill check purchase order tab grapes gas gasoline fuel milk flour rice sugar cheese meat beef chicken fabric
paint something
""".split())

# words that are grammar tokens: word -> token type (several words may share a type)
WORDS = {
    "plus": "PLUS", "and": "AND", "add": "ADD", "added": "ADDED", "sum": "SUM", "total": "SUM",
    "minus": "MINUS", "subtract": "SUBTRACT", "subtracted": "SUBTRACTED", "less": "LESS", "fewer": "LESS",
    "difference": "DIFFERENCE", "take": "TAKE", "away": "AWAY", "from": "FROM", "more": "MORE",
    "times": "TIMES", "multiply": "MULTIPLY", "multiplied": "MULTIPLIED", "product": "PRODUCT",
    "by": "BY", "divided": "DIVIDED", "divide": "DIVIDE", "over": "OVER", "into": "INTO",
    "quotient": "QUOTIENT", "of": "OF", "than": "THAN", "to": "TO", "power": "POWER", "raised": "RAISED",
    "squared": "SQUARED", "cubed": "CUBED", "square": "SQUARE", "cube": "CUBE", "root": "ROOT",
    "sqrt": "SQRT", "twice": "TWICE", "double": "DOUBLE", "doubled": "DOUBLED", "triple": "TRIPLE",
    "tripled": "TRIPLED", "halved": "HALVED", "halve": "HALVE", "percent": "PERCENT", "percentage": "PERCENT",
    "what": "WHAT", "is": "IS", "are": "IS", "equals": "EQUALS", "equal": "EQUALS", "a": "A", "an": "A",
    "how": "HOW", "much": "MUCH", "many": "MANY", "remainder": "REMAINDER", "mod": "MOD", "modulo": "MOD",
    "when": "WHEN", "mean": "MEAN", "average": "MEAN", "avg": "MEAN", "median": "MEDIAN", "increase": "INCREASE",
    "increased": "INCREASED", "decrease": "DECREASE", "decreased": "DECREASED", "reduce": "DECREASE",
    "reduced": "DECREASED", "exceed": "EXCEED", "exceeds": "EXCEED", "bigger": "MORE", "larger": "MORE",
    "greater": "MORE", "smaller": "LESS", "convert": "CONVERT", "if": "IF", "let": "LET", "for": "FOR",
    "negative": "NEGATIVE", "x": "X", "at": "AT", "each": "EACH", "cost": "COST", "costs": "COST",
    "left": "LEFT", "have": "HAVE", "has": "HAVE", "eat": "REMOVE", "eats": "REMOVE", "give": "REMOVE",
    "lose": "REMOVE", "loses": "REMOVE", "spend": "REMOVE", "spends": "REMOVE",
    "it": "IT", "there": "THERE", "quarter": "QUARTER", "nearest": "NEAREST", "round": "ROUND",
    "rounded": "ROUNDED", "whole": "WHOLE", "tenth": "TENTHW", "hundredth": "HUNDREDTHW", "places": "PLACES",
    "place": "PLACES", "decimal": "DECIMALW", "opposite": "OPPOSITE", "reciprocal": "RECIPROCAL",
    "absolute": "ABSOLUTE", "go": "GO", "goes": "GO", "worth": "WORTH", "as": "AS", "in": "IN", "does": "DOES",
    "given": "GIVEN", "suppose": "GIVEN", "number": "NUMBERW", "then": "THEN", "gives": "EQUALS",
    "makes": "EQUALS", "make": "EQUALS", "between": "BETWEEN", "ratio": "RATIO", "big": "MORE", "large": "MORE",
    "fraction": "FRACTIONW", "aspercent": "ASPERCENT", "out": "OUT", "change": "CHANGE", "off": "OFF",
    "on": "ON", "tip": "TIP", "tax": "TIP", "discount": "DISCOUNT", "items": "ITEMS", "things": "ITEMS",
    "people": "ITEMS", "apiece": "EACH", "split": "SPLIT", "shared": "SPLIT", "share": "SPLIT",
    "among": "AMONG", "evenly": "EVENLY", "equally": "EVENLY", "leaves": "LEAVES", "integer": "INTEGER",
    "sqrtsym": "SQRTSYM", "cbrtsym": "CBRTSYM", "sqrtp": "SQRTP", "cbrtp": "CBRTP", "which": "WHICH",
    "or": "OR", "floor": "FLOOR", "adding": "ADD", "subtracting": "SUBTRACT", "multiplying": "MULTIPLY",
    "dividing": "DIVIDE", "taking": "TAKE", "negate": "NEGATE", "absf": "ABSF", "equation": "EQUATION", "satisfies": "SATISFIES", "satisfy": "SATISFIES", "raise": "RAISE", "be": "BE", "such": "SUCH", "that": "THAT", "must": "MUST",
    "should": "MUST", "distance": "DISTANCE", "far": "FAR", "apart": "APART", "lesser": "LESS", "with": "WITH", "save": "SAVE",
    "after": "AFTER", "price": "PRICE", "per": "PER", "item": "ITEMS", "thing": "ITEMS",
    "clockat": "CLOCK", "clockbare": "CLOCK", "maximum": "MAXIMUM", "max": "MAXIMUM", "minimum": "MINIMUM",
    "ways": "WAYS", "long": "LONG", "largest": "MAXIMUM", "biggest": "MAXIMUM", "greatest": "MAXIMUM",
    "highest": "MAXIMUM", "smallest": "MINIMUM", "lowest": "MINIMUM", "least": "MINIMUM",
    "pay": "PAY", "pays": "PAY", "paid": "PAY", "paying": "PAY", "spent": "REMOVE", "spending": "REMOVE",
    "saved": "SAVE", "discounted": "DECREASED", "back": "BACK",
    "numbers": "NUMBERS", "digits": "NUMBERS", "numerals": "NUMBERS", "figures": "NUMBERS",
    "drop": "DECREASE", "where": "WHEN", "integers": "NUMBERS", "all": "ALL",
    "savings": "SAVE", "through": "THROUGH", "thru": "THROUGH", "mode": "MODE", "range": "RANGE", "up": "UP", "simple": "SIMPLE", "interest": "INTEREST",
    "earn": "EARN", "earns": "EARN", "earned": "EARN", "peryear": "PERYEAR", "gap": "DISTANCE",
    "differ": "DIFFER", "costing": "COST", "priced": "COST",
} | {w: "MOREADJ" for w in ("taller", "higher", "longer", "heavier", "older", "wider", "deeper", "farther",
                            "further", "faster", "costlier", "pricier")} \
  | {w: "LESSADJ" for w in ("shorter", "lower", "lighter", "younger", "narrower", "shallower", "cheaper",
                            "slower")} \
  | dict.fromkeys(NOUNS, "ITEMS")
