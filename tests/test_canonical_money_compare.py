"""Money and comparison phrasings as people type them (issue 49: the second, k9 and k10 rounds): each class in
general form with its exact value, near misses keyed apart (a swapped word changes the value or removes the key),
and the readings writers disagree on refused. Pure (no model)."""

from fractions import Fraction as F

import pytest

from galahad.flywheel.problems import canonical

K, V = canonical.canonical_key, canonical.value

KEYED = [
    # a tip or tax added, a discount taken, the total asked after the part
    ("$45 + 20% tip", F(54)), ("what's the total with a 20% tip on $45?", F(54)),
    ("total cost of $25 with 8% tax", F(27)), ("what is the total of $25 plus 8% sales tax", F(27)),
    ("15% tip on a $40 bill, what's the total?", F(46)), ("8% tax on $25, what is the total?", F(27)),
    ("25% discount on $80, what is the final price", F(60)), ("how much tax on $25 at 8%", F(2)),
    ("$50 minus 30%", F(35)), ("$80 - 25%", F(60)), ("$80 plus 15%", F(92)), ("$50 discounted by 30%", F(35)),
    ("a $50 shirt at 30% off", F(35)), ("sale price of $50 at 30% off", F(35)),
    ("price after a 30% discount on $50", F(35)), ("how much is saved with 30% off $50", F(15)),
    ("a $35 shirt is 20% off. What is the price?", F(28)), ("$35 marked down by 20%", F(28)),
    ("what is $60 after a 15% increase", F(69)),
    # change from a payment
    ("change from $20 for a $13.75 purchase", F(25, 4)), ("how much change from $20 if I spend $13.75", F(25, 4)),
    ("how much change do you get from $20 for $13.75", F(25, 4)),
    ("if you pay $20 for a $13.75 item, how much change do you get back?", F(25, 4)),
    ("change from a twenty-dollar bill for $13.75", F(25, 4)),
    # coins, a count at a price each, the price of one, a total of amounts
    ("how many quarters in $5", F(20)), ("how many quarters make $3", F(12)), ("$2 in nickels", F(40)),
    ("4 pens at $1.25 each", F(5)), ("cost of 3 tickets at $12 each", F(36)), ("how much for 3 at $5.99 each", F(1797, 100)),
    ("3 pens cost $2 each, what is the total", F(6)), ("if 5 pens cost $6, what's the price of one pen", F(6, 5)),
    ("the total of $12.50 and $7.25", F(79, 4)), ("$100 divided among 4 people", F(25)), ("$.99 times 3", F(297, 100)),
    ("$1,250.00 divided by 5", F(250)), ("unit price if 3 cost $7.50", F(5, 2)),
    # comparisons: how much more, taller, cheaper; how many times; largest, smallest, range; ratios
    ("how much taller is 180 cm than 165 cm", F(15)), ("how much cheaper is $5 than $8", F(3)),
    ("how much more expensive is $8 than $5", F(3)), ("90 is how much bigger than 65?", F(25)),
    ("65 is how much smaller than 90", F(25)), ("find how much bigger 90 is than 65", F(25)),
    ("by how much is 65 smaller than 90", F(25)), ("60 is how many times bigger than 15", F(4)),
    ("how many times as much is 60 as 15", F(4)),
    ("what is the max of 3, 9 and 4", F(9)), ("max(3, 9, 4)", F(9)), ("the largest of 3, 9 and 4", F(9)),
    ("which is the largest, 3, 9 or 4?", F(9)), ("which number is greatest: 3, 9, 4", F(9)),
    ("the largest number among 3, 9 and 4", F(9)), ("min(3, 9, 4)", F(3)), ("the min of 3, 9 and 4", F(3)),
    ("the smallest of 3, 9 and 4", F(3)), ("which is smallest: 3, 9 or 4", F(3)), ("the range of 3, 9, 4", F(6)),
    ("the sum of the numbers 3, 4 and 5", F(12)), ("the ratio of 4 to 12", F(1, 3)), ("4:12 as a fraction", F(1, 3)),
    ("the ratio 4:12 as a fraction", F(1, 3)), ("12 : 4 as a number", F(3)), ("ratio of 4:12", F(1, 3)),
    ("A meal costs $60. What is a 15% tip?", F(9)), ("What is the total cost of 3 items at $4.99 each?", F(1497, 100)),
    ("What's the smallest number in the list 4, 9, 2, 7?", F(2)), ("By what amount does 90 exceed 65?", F(25)),
    ("How far is 45 from 27?", F(18)), ("a $200 jacket is on sale for 25% off, what is the sale price", F(150)),
    ("how long from 9:30 am to 11:00 am in minutes", F(90)), ("convert 0.35 to a percent", F(35)),
]

NEAR_MISSES = [
    ("$45 + 20% tip", "20% tip on $45"), ("$50 minus 30%", "30% of $50"),
    ("change from $20 for a $13.75 purchase", "change from $20 for a $12.75 purchase"),
    ("how many quarters in $5", "how many dimes in $5"), ("the largest of 3, 9 and 4", "the smallest of 3, 9 and 4"),
    ("the largest of 3, 9 and 4", "the largest of 3, 8 and 4"), ("4:12 as a fraction", "12:4 as a fraction"),
    ("how much taller is 180 cm than 165 cm", "how much taller is 180 cm than 160 cm"),
    ("the range of 3, 9, 4", "the sum of 3, 9, 4"), ("$80 plus 15%", "$80 minus 15%"),
]

REFUSED = [
    "80 plus 15%", "80 minus 25%",  # no money: 80.15 / 79.75 or a percent of 80
    "is 5 bigger than 3?",  # yes or no, no number
    "which is bigger, 5 or 5", "the max of 5, 5 and 2", "which is largest: 9, 9 or 4",  # a tie: either
    "how much bigger is 3 than 10",  # a negative "how much bigger"
    "change from $10 for a $13.75 purchase",  # paid less than the price
    "how much longer is 2 m than 150 cm",  # two units: the answer's unit is the writer's choice
    "4:12",  # a ratio or a clock time
    "what is 4:12",
    "$80 after a 25% tax",  # after tax: added, or what is left after paying it
    "how many dollars is 20 euros",  # no rate given
]

# The k9 round (unseen-set coverage): currencies, dollars and cents in words, bills and coins, prices per unit,
# simple interest, comparisons, percents and averages.
K9_KEYED = [
    # pounds and euros: their own currencies, added and subtracted like dollars
    ("£12.50 + £7.80", F(203, 10)), ("what's £12.50 plus £7.80?", F(203, 10)), ("add £7.80 and £12.50", F(203, 10)),
    ("€100 minus €37.25", F(251, 4)), ("how much is 100 euros minus 37.25 euros", F(251, 4)),
    ("what's 100€ − 37.25€", F(251, 4)), ("20% off €80", F(64)),
    # dollars and cents in words: one amount in dollars
    ("18 dollars 40 cents", F(92, 5)), ("50 dollars take away 18 dollars 40 cents", F(158, 5)),
    ("fifty dollars plus eighteen dollars and forty cents", F(342, 5)),
    ("what is 3 dollars and 50 cents plus 2 dollars", F(11, 2)),
    # bills and coins converted
    ("how many $5 bills make $85", F(17)), ("How many five-dollar bills in $85?", F(17)),
    ("how many $20 bills in $100", F(5)), ("4 $20 bills + 3 $10 bills in dollars", F(110)),
    ("number of nickels in $2.00", F(40)), ("350¢ = $?", F(7, 2)), ("5 dimes + 3 nickels = $?", F(13, 20)),
    ("how many dollars is five dimes plus three nickels", F(13, 20)),
    ("five dimes + three nickels, how many dollars is that?", F(13, 20)),
    # tips and discounts, more word orders
    ("tip 15% on $42", F(63, 10)), ("how much is a 15% tip for a $42.00 check", F(63, 10)),
    ("a 15% gratuity on $42", F(63, 10)), ("take 25% off $80", F(60)), ("take 25% off of $80", F(60)),
    ("How much do you save on a $60 item at 30% off?", F(18)),
    ("how much do I pay for a $45 item at 20% off", F(36)), ("how much does a $45 item cost at 20% off", F(36)),
    ("how much do I pay for a $45 item after a 20% discount", F(36)),
    # a price per unit, the price of one unit, a count at a price each
    ("3 pounds at $2.40 per pound", F(36, 5)), ("$2.40 a pound for 3 pounds", F(36, 5)),
    ("$14.50/hr for 8 hours", F(116)), ("8 hours at $14.50 an hour", F(116)),
    ("what is the cost of 2.5 pounds of apples at $3 per pound", F(15, 2)),
    ("how much do 3 pounds of apples cost at $2.40 per pound", F(36, 5)),
    ("3 pounds at $2.40 per ounce", F(576, 5)), ("$4.80 for 16 ounces, what is the price per ounce?", F(3, 10)),
    ("$4.50 for 6 cans, price per can?", F(3, 4)), ("a dozen eggs at $0.25 each", F(3)),
    ("change from $10 for 3 things costing $1.85 each", F(89, 20)), ("12 x .99 dollars", F(297, 25)),
    # simple interest (a yearly rate)
    ("simple interest on $1000 at 5% for 3 years", F(150)), ("simple interest on $1000 for 3 years at 5%", F(150)),
    ("what is the simple interest on $500 at 4% per year for 3 years", F(60)),
    ("the simple interest on $1000 at 5% per annum for 6 months", F(25)),
    ("how much interest does $1000 earn at 5% simple interest for 3 years", F(150)),
    # sums of amounts, rounding to a cent or a dollar
    ("what do $3.49, $2.99 and $1.25 add up to", F(773, 100)), ("add $3.49, $2.99 and $1.25", F(773, 100)),
    ("3, 4 and 5 add up to what", F(12)), ("round $12.456 to the nearest cent", F(1246, 100)),
    ("round $12.46 to the nearest dollar", F(12)),
    # comparisons
    ("how much greater is 45 compared to 17", F(28)), ("how much less is 17 compared with 45", F(28)),
    ("twice as much as 37", F(74)), ("What is two times as much as 37?", F(74)), ("half as many as 58", F(29)),
    ("What number is half as big as 58?", F(29)), ("a third as much as 60", F(20)),
    ("2 times 9, then add 4", F(22)), ("2 times 9, then subtract 4", F(14)), ("double 5, then divide by 2", F(5)),
    ("Which fraction is bigger, 4/9 or 3/7?", F(4, 9)), ("what's larger, 7/8 or 0.85?", F(7, 8)),
    ("the gap between 45 and 17", F(28)), ("the positive difference between 17 and 45", F(28)),
    ("by how much do 45 and 17 differ", F(28)), ("how many fewer is 17 than 45", F(28)),
    ("difference between the largest and smallest of 4, 19, 11, 2", F(17)), ("max minus min of 4, 19, 11, 2", F(17)),
    ("biggest of 14 7 22 19", F(22)), ("ratio 6 to 15", F(2, 5)), ("6:15 simplified as a fraction", F(2, 5)),
    ("what percent more is 50 than 40", F(25)), ("50 is what percent more than 40", F(25)),
    ("40 is what percent less than 50", F(20)), ("by what percent is 40 less than 50", F(20)),
    # percentages, averages
    ("35 pct of 240", F(84)), ("what % of 80 is 20?", F(25)), ("what's the percentage increase going from 40 to 50", F(25)),
    ("40 to 50 is what % increase", F(25)), ("50 to 40 is what % decrease", F(20)), ("what percent is .35", F(35)),
    ("% change from 50 to 40", F(-20)), ("what is 20 as a percentage of 80", F(25)),
    ("avg of 4 8 15", F(9)), ("what's the avg of 10 & 15", F(25, 2)), ("find the median: 3, 9, 1, 7, 5", F(5)),
    ("what's the median of 3 9 1 7 5", F(5)), ("avg of 4 8 15, then add 2", F(11)),
    ("2 plus 9, then multiply by 4", F(44)), ("£5 and 50 pence", F(11, 2)), ("the mean of these numbers: 3, 5, 10", F(6)),
    # units asked for with one letter, years
    ("convert 3.2 km to m", F(3200)), ("2.5 km = ? m", F(2500)), ("2.5 yrs = ? months", F(30)),
]

K9_NEAR_MISSES = [
    ("£12.50 + £7.80", "£12.50 - £7.80"), ("tip 15% on $42", "tip 20% on $42"),
    ("take 25% off $80", "take 20% off $80"), ("3 pounds at $2.40 per pound", "3 pounds at $2.40 per ounce"),
    ("$14.50/hr for 8 hours", "$14.50/min for 8 hours"), ("twice as much as 37", "half as much as 37"),
    ("what percent more is 50 than 40", "what percent less is 40 than 50"),
    ("2 times 9, then add 4", "2 times 9, then subtract 4"), ("how many $5 bills make $85", "how many $5 bills make $80"),
    ("simple interest on $1000 at 5% for 3 years", "simple interest on $1000 at 5% for 6 months"),
    ("round $12.46 to the nearest dollar", "round $12.46 to the nearest cent"),
    ("max minus min of 4, 19, 11, 2", "the sum of 4, 19, 11, 2"), ("avg of 4 8 15", "median of 4 8 15"),
    ("18 dollars 40 cents", "18 dollars 4 cents"), ("40 to 50 is what % increase", "40 to 60 is what % increase"),
]

K9_REFUSED = [
    "$20 + £5", "convert $20 to £", "20 USD to GBP", "how many dollars is 20 euros",  # no exchange rate
    "3 dimes + 2 dimes",  # 5 dimes or 50 cents: coins with no unit asked for
    "$2 + 50 cents", "200 cents + 50 cents", "What is 25 cents times 8?",  # in dollars or in cents?
    "how many quarters in $5.10", "how many $20 bills in $99",  # 20 or 20.4, 4 or 4.95
    "3 kg at $2 per pound",  # a factor no one writes
    "interest on $1000 at 5% for 3 years",  # simple or compound
    "simple interest on 1000 at 5% for 3 years",  # no money
    "simple interest on $1000 at 5% for 30 days",  # day-count conventions differ
    "simple interest on $1000 at 5% for 5 months",  # fractions of a cent: writers round
    "round 1245 cents to the nearest dollar",  # 12 dollars or 1200 cents
    "round $12.5 to the nearest dollar",  # a tie
    "3 times more than 12",  # 36 or 48
    "50 is what percent more than 60", "50 to 40 is what % increase",  # against the direction
    "average of 1 000 2 000", "the median of 3 9 1/2 7", "max of 12 345 6",  # a thousands group, a mixed number
    "avg of 4 8 15 plus 2", "avg of 4 8 15 - 2",  # the list's last item or the whole list?
    "twice as much as 37 plus 1", "what percent more is 40 than 50", "18 dollars 140 cents", "£5 + 50 pence",
    "how many $5 bills do I need for $85",  # "need": an unknown word
]


# k10: amounts off, prices of m when n cost q, bills split n ways, successive discounts, tips on a bill, "the
# difference between" as |a - b|, exact "how many times", numbers in words, clock times, ranges' means
K10_KEYED = [
    ("what is $5 off $80", F(75)), ("take $5 off $80", F(75)), ("an $80 coat with $5 off", F(75)),
    ("if 3 cans cost $4.50, how much is one can", F(3, 2)), ("how much each if 3 cost $4.50", F(3, 2)),
    ("3 for $4.50, how much for 7", F(21, 2)), ("price of 7 when 3 are $4.50", F(21, 2)),
    ("$7.50 for 3, what is the price of 2?", F(5)), ("split an $84 bill 4 ways", F(21)),
    ("how much does each person pay if four people share a bill of 84 dollars", F(21)),
    ("$147.60 divided 4 ways", F(369, 10)),
    ("price of a $100 coat after 20% off then 10% off the sale price", F(72)),
    ("what is 100 dollars after a 20% discount followed by another 10% discount", F(72)),
    ("$200, 20% off then another 10% off, final price", F(144)), ("what's left when you divide 2024 by 9", F(8)),
    ("20 percent tip for a 56.50 bill", F(113, 10)), ("tip of 20% on a check of $56.50", F(113, 10)),
    ("sales tax at 7.5 percent on a 120 dollar purchase", F(9)), ("$62 plus 20% tip, total", F(372, 5)),
    ("80 bucks minus 25% off", F(60)), ("how much change from $20 if the total is $18.45?", F(31, 20)),
    ("change from a twenty on $18.45", F(31, 20)),
    ("total cost of six $3.25 tickets", F(39, 2)), ("6 x $3.25", F(39, 2)),
    ("how much is 3 dozen eggs at $0.25 an egg", F(9)), ("price of 3 dozen eggs if one egg is $0.25", F(9)),
    ("What do three dozen eggs cost at $.25 per egg?", F(9)),
    ("$3.60 for 16 ounces, how much per ounce", F(9, 40)), ("price per ounce of a 16 oz box that costs $3.60", F(9, 40)),
    ("what's the price per ounce if 16 oz costs $4.80", F(3, 10)),
    ("price difference between $12.99 and $9.49", F(7, 2)), ("what's the difference between 15 and 42", F(27)),
    ("difference between negative 5 and 8", F(13)), ("how many times larger is 250 than 40", F(25, 4)),
    ("250 is how many times 40", F(25, 4)), ("3/4 is bigger than 2/3 by how much", F(1, 12)),
    ("by what percent does 3 exceed 2", F(50)), ("how many percent larger is 3 than 2", F(50)),
    ("what percentage is 48 lower than 60", F(20)), ("80 to 60 is a decrease of what percent", F(25)),
    ("what's twelve and a half percent of 64", F(8)), ("what percent is 3 out of 8", F(75, 2)),
    ("convert .45 to percent", F(45)), ("convert 7/8 to %", F(175, 2)), ("half a percent of 1200", F(6)),
    ("15 per cent of 240", F(36)), ("47 divided by 5 remainder", F(2)), ("365 ÷ 7, what's the remainder", F(1)),
    ("remainder of 89 over 9", F(8)), ("what's left over when you divide 365 by 7", F(1)),
    ("2^{10} \\bmod 7", F(2)), ("twelve thousand four hundred and five", F(12405)), ("2.5 million as a number", F(2500000)),
    ("two point five million", F(2500000)), ("half a million", F(500000)), ("3 quarters of 100", F(75)),
    ("a gross is how many items", F(144)), ("how many things in one gross", F(144)),
    ("what's a dozen and a half in numbers", F(18)), ("3x-5=20 what is x", F(25, 3)), ("3x+5=20 find x", F(5)),
    ("7 = 2y - 3, solve for y", F(5)), ("$3x + 5 = 20$", F(5)), ("$f(x) = 3x + 2$. Compute $f(4)$.", F(14)),
    ("if h(t)=-16t^2+64t what is h(2)", F(64)), ("f(g(1)) where f(x)=2x, g(x)=x+3", F(8)),
    ("how many minutes from 9:40 to 11:15", F(95)), ("hours between 08:15 and 17:30", F(37, 4)),
    ("10:45am to 2:20pm how many minutes", F(215)), ("How long in minutes is it from 8:15 a.m. to 11:50 a.m.?", F(215)),
    ("average of all numbers from 1 to 100", F(101, 2)), ("mean of 1 through 10", F(11, 2)), ("avg(-3,5,10,-4)", F(2)),
    ("what is the sum of 3 and 4, multiplied by 5", F(35)), ("(3 + 4) x 5 = ?", F(35)), ("calc 23 × 47", F(1081)),
    ("add up 15, 27, 38 and 20", F(100)), ("3/4 ÷ 1/8", F(6)), ("1/8 ÷ 3/4", F(1, 6)),
    ("47 ÷ 6 = 7 R ?", F(5)), ("47/6 = 7 r ?", F(5)), ("how many whole times does 5 go into 17", F(3)),
    ("What's the unit price if 12 ounces cost $4.68?", F(39, 100)), ("pay for 38 hours at $15.50 hourly", F(589)),
    ("savings on $45 with a thirty percent discount", F(27, 2)), ("12 gallons of gas at $3.49 a gallon", F(1047, 25)),
    ("How much change do you get from a $20 bill if something costs $13.47?", F(653, 100)),
    ("mode of 2, 3, 3, 5, 7", F(3)), ("most common number in 4, 7, 7, 2, 9, 7, 4", F(7)),
    ("68°F in °C", F(20)), ("convert 68 degrees Fahrenheit to Celsius", F(20)), ("what's 100 C in F", F(212)),
    ("how much do I make working 40 hours at $18.50 an hour", F(740)), ("$15.50/hr x 38 hrs", F(589)),
    ("2 to the power of negative 3", F(1, 8)), ("what is 2 to the minus 3", F(1, 8)), ("whats 5 less then 12", F(7)),
]
K10_NEAR_MISSES = [("what is $5 off $80", "what is $5 on $80"), ("3 for $4.50, how much for 7", "3 for $4.50, how much for 6"),
        ("price of a $100 coat after 20% off then 10% off", "price of a $100 coat after 20% off then 20% off"),
        ("how many minutes from 9:40 to 11:15", "how many minutes from 9:40 to 11:25"),
        ("what's the difference between 15 and 42", "what's the sum of 15 and 42"),
        ("how many times larger is 250 than 40", "how many times larger is 40 than 250"),
        ("average of all numbers from 1 to 100", "average of all numbers from 1 to 99"), ("68°F in °C", "68°C in °F")]
K10_REFUSED = ["100 F in C", "what is $80 off $5", "68°F - 10°F in C", "47/6 = 8 r ?", "47 ÷ 6 = 7 R 4", "what is 2 divided by 3 rounded to the nearest hundredth", "mode of 2, 3, 3, 5, 5", "how many minutes from 10:30 to 1:15", "what is left when you divide 2024 by 9 and take 3", "price of 3 dozen eggs if one egg is 25 cents", "what is 2 + 3 thousand",
           "the difference of 15 and 42", "what is 5 off 80", "mean of 1.5 to 10", "3 for $4.50, how much for 0"]


@pytest.mark.parametrize("text,want", KEYED + K9_KEYED + K10_KEYED)
def test_keyed_with_exact_value(text: str, want: F) -> None:
    key = K(text)
    assert key is not None, text
    assert V(key) == want


@pytest.mark.parametrize("a,b", NEAR_MISSES + K9_NEAR_MISSES + K10_NEAR_MISSES)
def test_near_miss_is_keyed_apart(a: str, b: str) -> None:
    ka, kb = K(a), K(b)
    assert ka is not None
    assert kb is None or (kb != ka and V(kb) != V(ka))


@pytest.mark.parametrize("text", REFUSED + K9_REFUSED + K10_REFUSED)
def test_refused(text: str) -> None:
    assert K(text) is None
