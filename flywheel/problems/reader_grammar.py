"""The reader's grammar: every way the reader may read a token stream (reader_lexer), as one declarative
Lark grammar parsed by Earley with explicit ambiguity, so every parse is enumerated (reader_meaning.py
gives each parse its value and reader.py keys a text only when all parses agree).

Two tiers: symbols (+ - * / ^, brackets) bind by the usual precedence; word operators ("plus", "times",
"divided by") join symbol expressions and are read BOTH by precedence and left to right (spoken
arithmetic is read either way: where the two differ, there is no key). Phrases ("the sum of", "a third
of", "15% of", "3 squared") are operands; frames ("What is", "= ?", "Solve for x:") wrap the question."""

from __future__ import annotations

from functools import lru_cache

from lark import Lark
from lark.common import ParserConf
from lark.grammar import Rule, Symbol
from lark.lexer import Lexer
from lark.parser_frontends import ParsingFrontend, _construct_parsing_frontend

GRAMMAR = r"""
%declare NUM TSLASH PLUSS DASH STAR SLASH CARET LP RP COMMA EQ PCT SEP COLON BAR UNIT IDIOM FRAC1 FRACN
%declare DIVBY MORETHAN LESSTHAN DP SF SQRT CBRT POINT FUNC VAR PLUS AND ADD ADDED SUM MINUS SUBTRACT
%declare SUBTRACTED LESS DIFFERENCE TAKE AWAY FROM MORE TIMES MULTIPLY MULTIPLIED PRODUCT BY DIVIDED DIVIDE
%declare OVER INTO QUOTIENT OF THAN TO POWER RAISED SQUARED CUBED SQUARE CUBE ROOT TWICE DOUBLE DOUBLED
%declare TRIPLE TRIPLED HALVED HALVE PERCENT WHAT IS EQUALS A HOW MUCH MANY REMAINDER MOD WHEN MEAN MEDIAN
%declare INCREASE INCREASED DECREASE DECREASED EXCEED CONVERT IF LET FOR NEGATIVE X AT EACH COST LEFT HAVE
%declare REMOVE IT THERE QUARTER NEAREST ROUND ROUNDED WHOLE TENTHW HUNDREDTHW PLACES DECIMALW OPPOSITE
%declare RECIPROCAL ABSOLUTE GO WORTH AS IN NUMBERW THEN GIVEN DOES BETWEEN RATIO FRACTIONW ASPERCENT OUT
%declare CHANGE OFF ON TIP ITEMS SPLIT AMONG EVENLY LEAVES INTEGER SQRTSYM CBRTSYM SQRTP CBRTP WHICH OR
%declare RAISE BE SUCH THAT MUST MODSYM FLOOR EQUATION SATISFIES NEGATE ABSF POWW DISTANCE FAR APART
%declare DISCOUNT WITH SAVE AFTER PRICE PER CLOCK MAXIMUM MINIMUM WAYS LONG MOREADJ LESSADJ PAY BACK NUMBERS RANGE
%declare UP SIMPLE INTEREST EARN PERYEAR DIFFER ALL THROUGH MODE

start: (SEP | COLON)* _question (SEP | COMMA)*
_question: ask | equation_q | functions_q

// ---- frames --------------------------------------------------------------------------------------------
ask: _pre? expr _post?
   | expr IS WHAT
   | _pre? command _after?
   | _pre? subst_q
   | let_q
   | HOW MANY ITEMS (IS | IN | IS IN) idiomq | idiomq IS HOW MANY ITEMS
?subst_q: expr (AT | WHEN | FOR | IF) VAR (EQ | IS) sexpr -> at_value
   | (IF | GIVEN | LET) VAR (EQ | IS) sexpr (SEP | COMMA)* _pre? expr _post? -> value_at

?let_q: (LET | GIVEN) VAR (EQ | BE) expr (SEP | COMMA)+ _pre? VAR _post? -> let_value
_pre: (WHAT IS | WHAT IS OF | HOW MUCH IS | OF | WHAT | WHAT NUMBERW IS | IS | HOW MANY IS | WHAT IF
    | WHAT WHEN | IF | WHAT IS LEFT WHEN | WHAT IS LEFT IF) COLON?
_post: EQ | EQ SEP* WHAT | EQUALS | EQUALS WHAT | IS WHAT NUMBERW | EQ SEP* NUMBERW | EQ SEP | IS HOW MANY
    | IN NUMBERS
_after: SEP* WHAT IS LEFT | SEP* WHAT IS SUM

// ---- word tier: read by precedence and left to right -----------------------------------------------------
?expr: wsum | usum | (wchain | rev | relative | command) post -> postfix | rev | relative | compare | sexpr MOD sexpr -> mod
    // "2 divided by 3 rounded to the nearest hundredth": the whole rounded, or the 3 (no key where they differ)
    | wchain ROUNDED TO rounding -> round
// the same words read as their symbols, by the usual precedence ("8 divided by 2 * 4": (8 / 2) * 4 too)
?usum: usum PLUSS uprod -> add | usum DASH uprod -> sub | usum wadd uprod -> wbin | uprod
?uprod: uprod STAR sneg -> mul | uprod SLASH sneg -> div | uprod wmul sneg -> wbin | sneg
?wsum: wsum wadd wprod -> wbin | wprod
?wchain: wsum wadd wprod -> wbin | wprod wmul wunit -> wbin
?wprod: wprod wmul wunit -> wbin | wunit
!wadd: PLUS | MINUS | LESS | TAKE AWAY
!wmul: TIMES | DIVBY | OVER
?wunit: sexpr | sneg post -> postfix | wunit POWW sexp -> pow | sexpr loosepost -> postfix
!post: SQUARED | CUBED | DOUBLED | TRIPLED | HALVED
!loosepost: DOUBLED | TRIPLED | HALVED
?rev: wprod LESSTHAN wprod -> less_than | wprod MORETHAN wprod -> more_than
    | wprod ADDED TO wprod -> more_than | wprod SUBTRACTED FROM wprod -> less_than

// ---- symbol tier: usual precedence ---------------------------------------------------------------------
?sexpr: ssum
?ssum: ssum PLUSS sprod -> add | ssum DASH sprod -> sub | sprod
?sprod: sprod STAR sneg -> mul | sprod SLASH sneg -> div | sprod SLASH SLASH sneg -> floordiv
      | tdiv | sprod STAR tdiv -> mul | sprod SLASH NUM TSLASH NUM -> div_chain
      | sprod MOD sneg -> mod | sprod LP expr RP -> mul | sneg
?sneg: DASH sneg -> neg | NEGATIVE sneg -> neg | MINUS sneg -> neg | spow
?spow: sbase (CARET | POWW) sexp -> pow | satom | implicit | sbase CARET sexp TSLASH NUM -> pow_div
?sbase: batom | DASH batom -> neg
?sexp: batom | (DASH | NEGATIVE) batom -> neg | implicit
?satom: batom | quantity | phrase
?batom: NUM -> num
      | frac
      | LP expr RP
      | BAR expr BAR -> absolute
      | VAR -> var | A NUMBERW -> var | NUMBERW -> var | WHAT NUMBERW -> var
      | call
      | FLOOR LP expr RP -> floor | ABSF LP expr RP -> absolute
      | satom post -> postfix
      | satom ROUNDED TO rounding -> round
      | (SQRTP | SQRTSYM) satom -> sqrt | (CBRTP | CBRTSYM) satom -> cbrt
      | SQRTSYM spow -> sqrt | CBRTSYM spow -> cbrt
frac: NUM TSLASH NUM
// "3/4^2" is 3/(4^2) or (3/4)^2, wherever it stands as a factor ("2*3/4^2" too): two readings
tdiv: NUM TSLASH (sbase CARET sexp | implicit)
implicit: (NUM | frac) factor
?factor: fbase | fbase CARET sexp -> pow
?fbase: VAR -> var | LP expr RP | call
call: FUNC LP expr RP

// ---- quantities: units, money, idioms, fractions and percents in words -----------------------------------
?quantity: NUM UNIT -> amount
        | A UNIT -> amount
        | NUM AND fraction_words UNIT -> amount_mixed
        | quantity NUM UNIT -> amount_more
        | quantity AND NUM UNIT -> amount_more
        | count? IDIOM -> idiom
        | count? IDIOM AND A FRAC1 -> idiom_half
        | count? IDIOM AND NUM -> idiom_and
        | FRAC1 A IDIOM -> half_idiom | A FRAC1 IDIOM -> half_idiom
        | A UNIT AND A FRAC1 -> amount_and_half
        | FRAC1 A UNIT -> part_unit
        | quantity (COMMA quantity)* COMMA? AND quantity -> amount_list
        | fraction_words
        | NUM AND fraction_words -> mixed | NUM AND frac -> mixed | NUM AND fraction_words post -> mixed_post
        | NUM AND fraction_words POWW sexp -> mixed_pow
        | percent
count: NUM | A | NUM AND fraction_words -> mixed
fraction_words: A FRAC1 -> fw_one | NUM FRAC1 -> fw | NUM FRACN -> fw | FRAC1 -> fw_one
percent: (NUM | frac | pmixed) (PCT | PERCENT)
pmixed: NUM AND fraction_words -> mixed

// ---- phrases -------------------------------------------------------------------------------------------
?phrase: part OF of_arg -> part_of
      | SUM OF items -> sum | PRODUCT OF items -> product
      // a second operand in words may end the phrase or run on ("the difference between 9 and 2 plus 3":
      // 10 or 4): both parses, so no key where they differ
      // "the difference of a and b" is a - b in school algebra and |a - b| in speech: refused where a < b; "the
      // difference between a and b" (and "the distance between", "how far apart are a and b") is |a - b|, as
      // people and public generators' data read it
      | DIFFERENCE (OF | FROM) sexpr AND _arg2 -> difference
      | PRICE? DIFFERENCE BETWEEN sexpr AND _arg2 -> distance
      | DISTANCE BETWEEN sexpr AND _arg2 -> distance | HOW FAR APART IS sexpr AND _arg2 -> distance
      | HOW FAR IS sexpr FROM _arg2 -> distance
      // "the greater of a and b", "the smaller of a and b": max, min (two equal numbers: no key)
      // "the largest of 3, 9 and 4", "max(3, 9, 4)" (a tie for the extreme: no key)
      | (MORE | MAXIMUM) OF items -> maximum | (LESS | MINIMUM) OF items -> minimum
      | MAXIMUM LP items RP -> maximum | MINIMUM LP items RP -> minimum
      | QUOTIENT OF sexpr (AND | DIVBY) _arg2 -> quotient
      // "the ratio of 4 to 12", "4:12 as a fraction" (reader_lexer): a / b as a number
      | RATIO OF? sexpr TO _arg2 -> ratio
      | (MEAN OF | MEAN) items -> mean | MEAN LP items RP -> mean | MODE (OF | IN) items -> mode
      // the mean of the whole numbers from a to b: "the average of all numbers from 1 to 100", "mean of 1 through 10"
      | MEAN OF? (ALL? NUMBERS)? FROM? NUM (TO | THROUGH) NUM -> mean_range | MEDIAN OF? items -> median
      | (SQUARE OF | SQUARE) of_arg -> square | (CUBE OF | CUBE) of_arg -> cube
      | SQRT of_arg -> sqrt | CBRT of_arg -> cbrt
      | TWICE of_arg -> twice | (DOUBLE | DOUBLE OF) of_arg -> twice | TRIPLE of_arg -> thrice
      | (OPPOSITE OF | NEGATIVE OF) of_arg -> opposite | RECIPROCAL OF of_arg -> reciprocal
      | ABSOLUTE OF of_arg -> absolute
      | REMAINDER (WHEN | OF) sexpr IS? (DIVBY | SLASH | TSLASH | OVER) sexpr -> remainder
      | REMAINDER WHEN DIVIDE sexpr BY sexpr -> remainder
      | sexpr (DIVBY | SLASH) sexpr (COMMA | SEP)* (WHAT IS)? REMAINDER -> remainder
      // "47 ÷ 6 = 7 r ?", "47 divided by 6 is 7 remainder what": the remainder, where the quotient written is right
      | sexpr (DIVBY | SLASH) sexpr (EQ | IS) NUM REMAINDER (SEP | WHAT)? -> remainder_after
      | NUM TSLASH NUM (EQ | IS) NUM REMAINDER (SEP | WHAT)? -> remainder_tight
      | sexpr DIVBY sexpr LEAVES WHAT REMAINDER -> remainder
      | WHEN sexpr IS DIVBY sexpr (COMMA | SEP)* WHAT IS REMAINDER -> remainder
?part: fraction_words | frac | percent
_arg2: sexpr | expr
_tip: TIP | DISCOUNT
_span: FROM clock TO clock | BETWEEN clock AND clock
clock: CLOCK NUM
_tail: (COMMA | SEP)+ HOW MUCH IS _tip
_total: (COMMA | SEP)+ (WHAT IS | HOW MUCH IS)? (SUM COST? | PRICE | SUM PRICE)
?of_arg: satom | expr | WHAT -> var
items: NUMBERS? COLON? (sexpr (COMMA sexpr)* COMMA? AND (sexpr | expr) | sexpr (COMMA sexpr)+ | sexpr (AND sexpr)+
     // three or more bare numbers with spaces only (reader_lexer refuses a mixed number or a 3-digit group in such a run)
     | spnum spnum spnum+)
spnum: NUM -> num

// ---- commands ------------------------------------------------------------------------------------------
?command: ADD sexpr AND sneg -> c_add | ADD sexpr TO sneg -> c_add | (ADD | SUM) items -> sum
       | SUM sexpr AND sneg -> c_add | RAISE sexpr (CARET | POWW) sexp -> pow | RAISE sexpr BY sneg -> increase
       | SUBTRACT sexpr FROM sneg -> c_subtract_from | TAKE AWAY? sexpr AWAY? FROM sneg -> c_subtract_from
       | MULTIPLY sexpr (BY | AND) sneg -> c_multiply | DIVIDE sexpr BY sneg -> c_divide
       | DIVIDE sexpr INTO sneg -> c_divide_into
       | (DOUBLE | TWICE) sneg -> twice | TRIPLE sneg -> thrice | HALVE sneg -> c_halve
       | SQUARE sneg -> square | CUBE sneg -> cube | NEGATE sneg -> opposite
       | (CONVERT | CHANGE) sexpr (TO | IN | INTO) UNIT -> convert
       | ROUND sexpr TO rounding -> round | sexpr ROUNDED TO rounding -> round
       | sexpr TO rounding -> round
       | INCREASE sexpr BY sneg -> increase | DECREASE sexpr BY sneg -> decrease
       | (SPLIT | DIVIDE) sexpr EVENLY? (AMONG | BETWEEN | BY) NUM ITEMS? -> c_divide
       | command COMMA? (IN | TO) UNIT -> convert
rounding: NEAREST NUM -> r_nearest | NEAREST FRAC1 -> r_nearest_frac | NEAREST UNIT -> r_nearest_unit
        | NEAREST (WHOLE NUMBERW? | INTEGER) -> r_whole | NUM DP -> r_dp | NUM SF -> r_sf

// ---- relative change, conversions, comparisons -----------------------------------------------------------
?relative: sexpr INCREASED BY sexpr -> increase
        | sexpr (DECREASED BY | LESS) sexpr -> decrease
        | sexpr MORETHAN sexpr -> rel_more | sexpr LESSTHAN sexpr -> rel_less
        | percent OFF sexpr -> off | sexpr (OFF | LESS) percent -> off_r
        | A? percent _tip (ON | OF | FOR) _obj _tail? -> part_of | _tip (OF | AT)? percent (ON | FOR | OF) _obj -> part_of
        | TAKE percent OFF OF? sexpr -> off
        | _tip ON sexpr AT percent OFF? -> tip_at
        // a discount takes the part off ("$80 with 25% off", "the price of $80 after a 25% discount")
        // time elapsed between two clock times ("from 10 pm to 6 am": the next morning), or two whole hours of
        // the 24-hour clock ("how many hours from 9 to 17", the second after the first)
        | HOW MANY UNIT (IS IT)? _span -> elapsed | UNIT _span -> elapsed
        | (_span | clock TO clock) (COMMA | SEP)* HOW MANY UNIT (IS THAT?)? -> elapsed_r
        | HOW MANY UNIT (IS IT)? FROM NUM TO NUM -> elapsed_24
        | HOW LONG (IS IT?)? _span IN UNIT -> elapsed_r | HOW LONG IN UNIT (IS IT)? _span -> elapsed
        // a tip or tax added: "$25 plus 8% tax", "$40 with a 15% tip"
        | sexpr (PLUS | PLUSS | WITH) A? percent TIP ((COMMA | SEP)* SUM)? -> plus_part
        | SUM (ON | OF | FOR) _obj WITH A? percent TIP -> plus_part
        | (HOW MUCH)? CHANGE BACK? FROM sexpr IF (SUM | PRICE | ITEMS) (IS | COST) sexpr -> change | percent OFF OF sexpr -> off
        | SUM WITH A? percent TIP ON sexpr -> tip_total | SUM COST? OF sexpr (PLUS | PLUSS | WITH) A? percent TIP -> plus_part
        | sexpr AFTER A? percent INCREASE -> plus_part | sexpr AFTER A? percent DECREASE -> off_r
        | HOW MUCH _tip ON sexpr AT percent OFF? -> tip_at | PRICE? OF? sexpr AT percent OFF -> off_r
        | PRICE AFTER A? percent DISCOUNT ON sexpr -> off | HOW MUCH IS? SAVE WITH percent OFF sexpr -> part_of
        // an amount less a percent of it: "$80 minus 25%" (money only: "80 minus 25%" may be 79.75)
        | sexpr (MINUS | DASH) percent OFF? -> minus_pct | sexpr (PLUS | PLUSS) percent -> plus_pct
        | SUM COST? OF quantity -> total
        // change from a payment: "change from $20 for a $13.75 purchase", "if you pay $20 for $13.75, how much change"
        | (HOW MUCH)? CHANGE BACK? FROM sexpr (FOR | ON | IF REMOVE | AFTER REMOVE) sexpr -> change
        | PAY WITH? sexpr FOR sexpr (COMMA | SEP)* (HOW MUCH | WHAT IS)? CHANGE BACK? -> change
        | sexpr DIVIDED EVENLY? (AMONG | BETWEEN) NUM ITEMS? -> c_divide
        | sexpr (SPLIT | DIVIDED) NUM WAYS ((COMMA | SEP)* HOW MUCH IS? EACH)? -> c_divide | (SPLIT | DIVIDE) _obj NUM WAYS -> c_divide
        | HOW MUCH DOES? EACH ITEMS? PAY IF NUM ITEMS? SPLIT _obj -> split_r
        // an amount of money off another: "$5 off $80", "an $80 item with $5 off"
        | sexpr OFF sexpr -> off_amount | TAKE sexpr OFF OF? sexpr -> off_amount
        | PRICE AFTER TAKE sexpr OFF OF? sexpr -> off_amount | sexpr ITEMS? WITH sexpr OFF -> off_amount_r
        // discounts one after another: "$100, 20% off, then 10% off the sale price"
        | relative COMMA? AND? THEN A? percent (OFF | DISCOUNT) PRICE? (COMMA PRICE)? -> off_r | sexpr COMMA? percent OFF -> off_r
        // the price of m when n cost q: "3 for $4.50, how much for 7?", "how much each if 3 cost $4.50", "price
        // per item if 3 cost $7.50", "$7.50 for 3, what is the price of one?"
        | price_given (COMMA | SEP)* price_ask -> scaled | price_ask (IF | WHEN) price_given -> scaled_r
        // the count at a price each: "total cost of six $3.25 tickets", "price of 3 dozen eggs if one egg is 25 cents"
        | (SUM COST? | COST | PRICE) OF cnt sexpr ITEMS -> at_each_money
        | PRICE OF cnt ITEMS? IF NUM ITEMS? (IS | COST) sexpr -> at_each_if
        | HOW MUCH FOR? cnt ITEMS? THAT COST sexpr EACH -> at_each
        // the price of one unit: "price per ounce of a 16 oz box that costs $3.60"
        | (PRICE | COST) PER UNIT (OF _obj (THAT COST | FOR | AT) | IF _obj COST) sexpr -> per_unit_r
        // "what's the unit price if 12 ounces cost $4.68": per the amount's own unit
        | (WHAT IS)? PRICE PER ITEMS IF quantity COST sexpr -> per_own_unit
        // a phrase closed by a comma, then an operation: "the sum of 3 and 4, multiplied by 5"
        | phrase COMMA (STAR | TIMES) sneg -> mul | phrase COMMA DIVBY sneg -> div
        | sexpr WITH percent OFF -> off_r | PRICE? OF? sexpr AFTER (A? percent DISCOUNT | percent OFF) -> off_r
        | sexpr (IN | TO | INTO | AS) UNIT -> convert | sexpr (IS | EQ) HOW MANY UNIT -> convert
        | sexpr EQ SEP* UNIT -> convert | sexpr EQ SEP* HOW MANY UNIT -> convert
        | HOW MANY UNIT (IS | IN | IS IN | IS THERE IN | EQ | EQUALS | THERE IS IN) sexpr -> convert_r
        | UNIT IN sexpr -> convert_r
        | WHAT PERCENT OF sexpr IS sexpr -> pct_of_r | sexpr IS WHAT PERCENT OF sexpr -> pct_of
        | WHAT PERCENT IS sexpr OF sexpr -> pct_of
        | WHAT FRACTIONW OF sexpr IS sexpr -> frac_of_r | sexpr IS WHAT FRACTIONW OF sexpr -> frac_of
        | CONVERT? expr ASPERCENT -> as_percent | CONVERT sexpr (TO | IN | INTO) PERCENT -> as_percent
        | WHAT PERCENT IS sexpr DIVBY sexpr -> pct_of
        | sexpr TO sexpr IS A? INCREASE OF WHAT PERCENT -> pct_up
        | sexpr TO sexpr IS A? DECREASE OF WHAT PERCENT -> pct_down
        | PERCENT CHANGE FROM sexpr TO sexpr -> pct_change
        | PERCENT (INCREASE | INCREASED) FROM sexpr TO sexpr -> pct_up
        | PERCENT (DECREASE | DECREASED) FROM sexpr TO sexpr -> pct_down
        | NUM ITEMS? AT sexpr EACH? -> at_each | (SPLIT | DIVIDE) sexpr EVENLY? (AMONG | BETWEEN) NUM ITEMS? -> c_divide
        | sexpr SPLIT EVENLY? (AMONG | BETWEEN | BY) NUM ITEMS? ((COMMA | SEP)* HOW MUCH DOES? EACH)? -> c_divide
        | (WHAT cnt ITEMS? COST | SUM? (COST | PRICE) OF cnt ITEMS?) AT sexpr EACH -> at_each
        | HOW MUCH FOR? NUM ITEMS? COST? AT sexpr EACH -> at_each
        | cnt ITEMS? (AT | COST | COMMA) sexpr EACH (COMMA | SEP)* (WHAT IS | HOW MUCH IS)? SUM COST? -> at_each
        // the total after a tip or tax, the price after a discount: "8% tax on $25, what is the total?"
        | A? percent TIP (ON | OF) sexpr _total -> tip_total | A? percent DISCOUNT (ON | OF) sexpr _total -> off
        | sexpr IS percent OFF (COMMA | SEP)* (WHAT IS PRICE | HOW MUCH IS IT | WHAT DOES IT COST) -> off_r
        | RANGE OF items -> range
        // "the difference between the largest and smallest of 4, 19, 11", "max minus min of 4, 19, 11"
        | DIFFERENCE BETWEEN MAXIMUM AND MINIMUM (OF | IN | AMONG) items -> range
        | MAXIMUM (MINUS | DASH) MINIMUM (OF | IN | AMONG) items -> range
        // "A meal costs $60. What is a 15% tip?": the part
        | A? ITEMS (COST | IS) sexpr (SEP | COMMA)+ (WHAT IS | HOW MUCH IS) A? percent _tip -> tip_after
        // a price per unit times an amount in that unit: "3 pounds at $2.40 per pound", "$14.50 an hour for 8 hours"
        | sexpr (PER | SLASH | A) UNIT FOR sexpr -> rate
        | (HOW MUCH FOR | COST OF | PAY FOR | SUM FOR)? sexpr (OF ITEMS)? AT sexpr (PER | SLASH | A) UNIT -> rate_r
        | HOW MUCH DOES? sexpr (OF ITEMS)? COST AT sexpr (PER | SLASH | A) UNIT -> rate_r
        // pay: "how much do I make working 40 hours at $18.50 an hour", "$15.50/hr x 38 hrs"
        | HOW MUCH (EARN | EQUALS) FOR? sexpr AT sexpr (PER | SLASH | A) UNIT -> rate_r
        | sexpr (PER | SLASH | A) UNIT (STAR | TIMES) sexpr -> rate
        // the price of one unit or item: "$4.80 for 16 ounces, what is the price per ounce?", "$4.50 for 6 cans, price per can?"
        | sexpr FOR sexpr (COMMA | SEP)* ((WHAT IS | HOW MUCH IS)? (PRICE | COST) | HOW MUCH) PER UNIT -> per_unit
        // change for a count at a price each: "change from $10 for 3 things costing $1.85 each"
        | (HOW MUCH)? CHANGE BACK? FROM sexpr (FOR | ON) NUM ITEMS? (AT | COST) sexpr EACH -> change_each
        // simple interest (the rate is yearly): "the simple interest on $1000 at 5% for 3 years"
        | SIMPLE INTEREST EARN? (ON | OF | FOR) sexpr AT percent PERYEAR? (FOR | OVER | IN) sexpr -> interest
        | SIMPLE INTEREST EARN? (ON | OF | FOR) sexpr (FOR | OVER | IN) sexpr AT percent PERYEAR? -> interest_r
        | HOW MUCH INTEREST DOES sexpr EARN AT percent PERYEAR? SIMPLE INTEREST PERYEAR? (FOR | OVER | IN) sexpr -> interest
        | HOW MUCH SIMPLE INTEREST DOES sexpr EARN AT percent PERYEAR? (FOR | OVER | IN) sexpr -> interest
        // a sum: "what do $3.49, $2.99 and $1.25 add up to", "add $3.49, $2.99 and $1.25"
        | WHAT DOES? quantity ADD UP TO -> total_list | quantity ADD UP TO WHAT? -> total_list | ADD quantity -> total_list
        | WHAT DOES? items ADD UP TO -> sum | items ADD UP TO WHAT? -> sum
        | idiomq ITEMS? AT sexpr EACH -> at_each
        | HOW MUCH (DOES? PAY FOR sexpr | DOES sexpr COST) (AT | WITH) percent OFF -> off_r
        | (HOW MUCH IS?)? SAVE ON _obj (AT | WITH) A? percent (OFF | DISCOUNT) -> tip_at
        | HOW MUCH (DOES? PAY FOR sexpr | DOES sexpr COST) AFTER A? percent DISCOUNT -> off_r
        | HOW MUCH (DOES? PAY FOR sexpr | DOES sexpr COST) WITH A? percent TIP -> plus_part
        | NUMBERW OF UNIT (IN | IS IN | EQUALS) sexpr -> convert_r
        | HOW MANY UNIT (IS | EQUALS) expr -> convert_r | sexpr (COMMA | SEP)+ HOW MANY UNIT IS THAT -> convert
        // percentages: "what percent is .35", "40 to 50 is what % increase", "20 as a percent of 80"
        | WHAT PERCENT IS sexpr -> as_percent | sexpr ASPERCENT OF sexpr -> pct_of
        | sexpr TO sexpr IS WHAT PERCENT (INCREASE | INCREASED) -> pct_up
        | sexpr TO sexpr IS WHAT PERCENT (DECREASE | DECREASED) -> pct_down
        | sexpr TO sexpr IS WHAT PERCENT CHANGE -> pct_change
        // a sequence of steps: "2 times 9, then add 4"
        | expr COMMA? THEN ADD sneg -> add | expr COMMA? THEN SUBTRACT sneg -> sub
        | expr COMMA? THEN MULTIPLY BY sneg -> mul | expr COMMA? THEN DIVIDE BY sneg -> div
idiomq: count? IDIOM -> idiom
?cnt: spnum | idiomq
_obj: A? sexpr ITEMS? | A? ITEMS OF sexpr
price_given: NUM ITEMS? (FOR | COST | IS) sexpr -> given | IF NUM ITEMS? COST sexpr -> given | sexpr FOR NUM ITEMS? -> given_r
price_ask: ((WHAT IS)? PRICE OF | HOW MUCH (IS | FOR | DOES)? | WHAT DOES? | COST OF) NUM ITEMS? COST? -> ask_n
         | (WHAT IS | HOW MUCH IS)? (PRICE | COST) PER ITEMS? | HOW MUCH EACH | HOW MUCH IS EACH | PRICE OF EACH
         | HOW MUCH PER ITEMS
?compare: HOW (MUCH | MANY) MORE IS sexpr THAN sexpr -> cmp_more | HOW (MUCH | MANY) LESS IS sexpr THAN sexpr -> cmp_less
       | BY HOW MUCH IS sexpr MORE THAN sexpr -> cmp_more | BY HOW MUCH IS sexpr LESS THAN sexpr -> cmp_less
       | HOW (MUCH | MANY) MORE THAN sexpr IS sexpr -> cmp_less | HOW MUCH LESS THAN sexpr IS sexpr -> cmp_more
       | HOW MUCH DOES sexpr EXCEED sexpr BY -> cmp_more
       | sexpr IS (MORE | MOREADJ) THAN sexpr BY HOW MUCH -> cmp_more | sexpr IS (LESS | LESSADJ) THAN sexpr BY HOW MUCH -> cmp_less | sexpr EXCEED sexpr BY HOW MUCH -> cmp_more
       | HOW MANY MORETHAN sexpr IS sexpr -> cmp_less
       // "is a or b larger?", "what is the larger number, a or b?", "the maximum of a and b"
       | IS sexpr OR sexpr MORE -> maximum | IS sexpr OR sexpr LESS -> minimum
       | WHAT IS MORE (NUMBERW | FRACTIONW)? (COMMA | COLON)? sexpr OR _arg2 -> maximum
       | WHAT IS LESS (NUMBERW | FRACTIONW)? (COMMA | COLON)? sexpr OR _arg2 -> minimum
       | BY HOW MUCH DOES? sexpr EXCEED sexpr -> cmp_more | sexpr IS HOW MUCH MORETHAN sexpr -> cmp_more
       | BY HOW MUCH IS sexpr MORETHAN sexpr -> cmp_more | BY HOW MUCH IS sexpr LESSTHAN sexpr -> cmp_less
       | HOW MUCH LESSTHAN sexpr IS sexpr -> cmp_more | HOW MUCH MORETHAN sexpr IS sexpr -> cmp_less
       | sexpr IS HOW MANY TIMES (AS (MORE | MUCH) AS)? sexpr -> cmp_times
       | HOW MANY TIMES (AS (MORE | MUCH) AS)? sexpr IS sexpr -> cmp_times_r | HOW MANY TIMES AS MUCH IS sexpr AS sexpr -> cmp_times
       // the question embedded: "find how much bigger 90 is than 65"
       | HOW MUCH (MORE | MOREADJ) sexpr IS THAN sexpr -> cmp_more | HOW MUCH (LESS | LESSADJ) sexpr IS THAN sexpr -> cmp_less
       | MAXIMUM NUMBERW? (IN | AMONG) items -> maximum | MINIMUM NUMBERW? (IN | AMONG) items -> minimum
       | HOW MANY TIMES MORE IS sexpr THAN sexpr -> cmp_times | HOW MANY TIMES AS MORE IS sexpr AS sexpr -> cmp_times
       | HOW MANY TIMES DOES sexpr GO INTO sexpr -> goes_into
       | HOW MANY WHOLE TIMES DOES sexpr GO INTO sexpr -> whole_times
       | WHICH (NUMBERW | FRACTIONW)? IS (MORE | MAXIMUM) (COMMA | COLON)? choices -> maximum
       | WHICH (NUMBERW | FRACTIONW)? IS (LESS | MINIMUM) (COMMA | COLON)? choices -> minimum
       | WHAT IS MAXIMUM NUMBERW (COMMA | COLON)? choices -> maximum
       | WHAT IS MINIMUM NUMBERW (COMMA | COLON)? choices -> minimum
       // a comparative of a measure ("how much taller is 180 cm than 165 cm", "65 is how much smaller than 90")
       | HOW MUCH MOREADJ IS sexpr THAN sexpr -> cmp_more | HOW MUCH LESSADJ IS sexpr THAN sexpr -> cmp_less
       | BY HOW MUCH IS sexpr MOREADJ THAN sexpr -> cmp_more | BY HOW MUCH IS sexpr LESSADJ THAN sexpr -> cmp_less
       | sexpr IS HOW MUCH (MORE | MOREADJ) THAN sexpr -> cmp_more
       | sexpr IS HOW MUCH (LESS | LESSADJ) THAN sexpr -> cmp_less | sexpr IS HOW MUCH LESSTHAN sexpr -> cmp_less
       | HOW MANY TIMES IS sexpr MORE THAN sexpr -> cmp_times | sexpr IS HOW MANY TIMES MORE THAN sexpr -> cmp_times
       // "twice as much as 37", "3 times as many as 12", "half as big as 58"
       | TWICE AS (MUCH | MANY | MORE | LONG) AS sexpr -> twice
       // "by how much do 45 and 17 differ", "how much do 45 and 17 differ by": |a - b|
       | BY HOW MUCH DOES? sexpr AND sexpr DIFFER -> distance | HOW MUCH DOES? sexpr AND sexpr DIFFER BY -> distance
       | (NUM TIMES | fraction_words) AS (MUCH | MANY | MORE | LONG) AS sexpr -> as_much
       // percent more or less than: "50 is what percent more than 40" ((50 - 40) / 40)
       | WHAT PERCENT (MORE | MOREADJ) IS sexpr THAN sexpr -> pct_more | WHAT PERCENT (LESS | LESSADJ) IS sexpr THAN sexpr -> pct_less
       | sexpr IS WHAT PERCENT (MORETHAN | (MORE | MOREADJ) THAN) sexpr -> pct_more
       | sexpr IS WHAT PERCENT (LESSTHAN | (LESS | LESSADJ) THAN) sexpr -> pct_less
       | BY WHAT PERCENT IS sexpr (MORETHAN | (MORE | MOREADJ) THAN) sexpr -> pct_more
       | BY WHAT PERCENT IS sexpr (LESSTHAN | (LESS | LESSADJ) THAN) sexpr -> pct_less
       | BY WHAT PERCENT DOES sexpr EXCEED sexpr -> pct_more
       | HOW MANY PERCENT (MORE | MOREADJ) IS sexpr THAN sexpr -> pct_more
       | HOW MANY PERCENT (LESS | LESSADJ) IS sexpr THAN sexpr -> pct_less
       | WHAT PERCENT IS sexpr (MORETHAN | MOREADJ THAN) sexpr -> pct_more
       | WHAT PERCENT IS sexpr (LESSTHAN | LESSADJ THAN) sexpr -> pct_less
choices: sexpr (COMMA sexpr)* COMMA? OR _arg2 -> items | sexpr (COMMA sexpr)+ -> items

// ---- equations and functions ---------------------------------------------------------------------------
equation_q: _eq_pre? equation _eq_post?
          | equation (SEP | COMMA)* WHAT IS (VAR | NUMBERW | IT)
          | equation (SEP | COMMA)+ VAR
          | (IF | GIVEN | LET) equation (COMMA | SEP)* (WHAT IS | THEN)? (VAR | NUMBERW | IT) (EQ | IS)?
          | (LET | GIVEN | IF) equation (SEP | COMMA)+ (FOR VAR | VAR) (EQ SEP?)?
          | VAR SUCH THAT equation | WHAT MUST VAR (BE | EQUALS) (SUCH THAT | THAT | FOR | IF) equation
          | WHAT IS VAR (IF | WHEN) equation | VAR (IF | WHEN) equation
equation: expr EQ expr | expr EQUALS expr | expr IS expr
_eq_pre: FOR VAR COLON? | WHAT OF? VAR THAT? SATISFIES COLON? | COLON | VAR COLON | OF? VAR (IN IS? EQUATION | THAT? SATISFIES | IF | WHEN) COLON?
_eq_post: (COMMA | SEP)* FOR VAR | (COMMA | SEP) VAR EQ SEP? | COMMA (WHAT IS)? (NUMBERW | IT)

functions_q: (LET | IF | GIVEN)? fdefs (SEP | COMMA | THEN)+ _pre? call _post?
           | _pre? call (IF | WHEN | GIVEN) fdefs
           | (LET | IF | GIVEN)? fdefs (WHAT IS | HOW MUCH IS) call _post?
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
    """The Earley parser of the whole grammar, built once on first use."""
    global _PARSER
    if _PARSER is None:
        _PARSER = Lark(GRAMMAR, parser="earley", lexer=_Tokens, ambiguity="explicit")
        # Earley compares symbols and rules millions of times: a rule's name (a lark Token, compared in Python) is
        # made a plain string (equal to the same strings, compared in C), and each symbol one shared object, so
        # that equal symbols are mostly the same object and the identity test below answers first
        shared: dict = {}
        for rule in _PARSER.rules:
            rule.origin.name = str(rule.origin.name)
            rule.origin = shared.setdefault((False, rule.origin.name), rule.origin)
            rule.expansion = [shared.setdefault((s.is_term, s.name), s) for s in rule.expansion]
    return _PARSER


def _identity_first(eq):
    """`a == b` answered `True` at once when a is b (these equalities are reflexive: the same answers)."""
    def fast(self, other):  # noqa: ANN001, ANN202
        return self is other or eq(self, other)
    return fast


if not getattr(Symbol.__eq__, "_identity_first", False):
    for _cls in (Symbol, Rule):
        _cls.__eq__ = _identity_first(_cls.__eq__)
        _cls.__eq__._identity_first = True


# usum/uprod read word operators ("plus", "times") by the usual precedence beside symbols. In a text with no word
# operator they derive exactly what ssum/sprod derive (add, sub, mul, div of the same operands, read by the same
# meanings), so they add only copies of parses: for such a text they are left out (the readings are the same set).
_WORD_OPS = frozenset({"PLUS", "MINUS", "LESS", "TAKE", "TIMES", "DIVBY", "OVER"})
_WORD_TIER_COPY = frozenset({"usum", "uprod"})


@lru_cache(maxsize=512)
def parser_for(terminals: frozenset) -> ParsingFrontend:
    """The Earley parser of the grammar's rules that use only these terminals (the token types of a text).
    A rule that needs a terminal the text lacks takes part in no parse of it, so the parses, and with them
    every reading, are the same as the whole grammar's; only the work per token is far smaller."""
    full = parser()
    rules = [r for r in full.rules if all(not s.is_term or s.name in terminals for s in r.expansion)
             and (terminals & _WORD_OPS or r.origin.name not in _WORD_TIER_COPY)]
    while True:  # drop rules that need a rule no longer there
        have = {r.origin for r in rules}
        kept = [r for r in rules if all(s.is_term or s in have for s in r.expansion)]
        if len(kept) == len(rules):
            break
        rules = kept
    conf = ParserConf(rules, full._callbacks, full.options.start)
    return _construct_parsing_frontend(full.options.parser, full.options.lexer, full.lexer_conf, conf,
                                       options=full.options)
