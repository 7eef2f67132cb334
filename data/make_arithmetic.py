"""Generator for the project-authored arithmetic word-problem datasets.

By default writes ``data/arithmetic.jsonl``: 200 English word problems, 40 at
each difficulty level 1..5 (interleaved 1,2,3,4,5,1,2,... so any prefix of the
file is balanced across levels).  With ``--items N`` (a multiple of 200) it
writes a larger set whose first 200 items are exactly those of
``data/arithmetic.jsonl`` (same ids, questions, answers, order), followed by
further rounds of 200 items, 40 per level, interleaved by level within each
round in the same way, so any prefix of the larger file stays balanced too.
Round 0 is drawn from the seed itself (that is what keeps the first 200 items
unchanged); round r >= 1 is drawn from its own seed, derived from the main seed
and r with sha256.  Questions are unique across the whole file, not only within
a round.  ``data/arithmetic1k.jsonl`` (1,000 items) is written this way.

Each line is a JSON object with the keys, in order:

    id          "arith-001" .. "arith-200", then "arith-201" .. "arith-1000"
                (3 digits at least, from --first-id; stable for a given seed)
    difficulty  int 1-5
    question    the word problem, ending with a question mark
    expression  Python arithmetic using only int literals and + - * // ( ),
                the exact computation the question describes
    answer      int, == eval(expression), always >= 0
    template    short name of the template that produced the item

Difficulty levels:
    1  one addition or subtraction, numbers under 20
    2  one multiplication, or two add/sub steps, numbers under 100
    3  two steps mixing multiplication and addition/subtraction
    4  three steps including an exact division
    5  four or more steps with numbers in the hundreds (unit prices, groups,
       "twice as many", "half", percentages as exact integer computations)

Every number in an expression appears in its question as digits, except the
literal 2 (written as "twice"/"half" in the question) and the literal 100
(written as "percent").  Before writing, the generator checks every item with a
restricted ``ast`` evaluator (only +, -, *, // on non-negative int literals),
checks that every division is exact, that answers are non-negative ints, that
numbers in question and expression agree, that questions are unique across the
file (with ``--exclude``: that (template, expression) pairs are unique and none is
excluded), and that every round is balanced across levels; any failure raises
AssertionError.

Standard library only.  Deterministic: ``random.Random`` per round.

Run from the repository root:

    python data/make_arithmetic.py            # data/arithmetic.jsonl, seed 20261130
    python data/make_arithmetic.py --seed 7   # a different (still fixed) draw
    python data/make_arithmetic.py --items 1000 --out data/arithmetic1k.jsonl
    python data/make_arithmetic.py --items 2000 --skip 1000 --out data/arithmetic_crl.jsonl

``--skip N`` (a multiple of 200) generates the whole set and writes only the items after the first N:
``data/arithmetic_crl.jsonl`` holds rounds 5-9 (ids arith-1001 .. arith-2000), whose questions differ
from every question of ``data/arithmetic1k.jsonl`` (and so of ``data/arithmetic.jsonl``), because
questions are unique across the whole generated file.  Its questions differ, but not always what they
ask: a question is its template's sentence with names, objects and numbers filled in, so two items can
share their (template, expression), the same computation asked with other names: 140 of the 1,000
items of ``data/arithmetic_crl.jsonl`` share theirs with an item of ``data/arithmetic1k.jsonl``, and
162 share theirs with another item of the same file.

``--exclude FILE ...`` keeps whole computations apart: no item's (template, expression) is one found
in the given files, and no two items of the output share theirs (``--exclude`` with no file asks only
the latter).  A template whose (template, expression) pairs run out (1000 draws give no new one) is
skipped from then on, and the level's slots cycle over its other templates, so every round stays
balanced across levels while templates with few pairs (``l2_rows_mul``, ``l2_boxes_mul``,
``l3_shop_change``) give fewer items.  ``--first-id N`` numbers the ids from arith-N; with
``--exclude`` an id already in those files is refused.  ``data/arithmetic_crl2.jsonl`` (1,200 items,
240 per level, ids arith-2001 .. arith-3200) is written this way, from its own seed:

    python data/make_arithmetic.py --items 1200 --seed 20261206 --first-id 2001 \
        --exclude data/arithmetic.jsonl data/arithmetic1k.jsonl data/arithmetic_crl.jsonl \
        --out data/arithmetic_crl2.jsonl

C-RL trains and evaluates on it: no computation it trains on, calibrates on or reports is one the
study measures (``arithmetic1k``) or one the earlier C-RL items (``arithmetic_crl``) asked, and its
training, dev and held-out items never ask the same computation.  Without ``--exclude`` (and with
--first-id 1) nothing changes: the files above are drawn exactly as their commands say.
"""
from __future__ import annotations

import argparse
import ast
import hashlib
import json
import random
import re
from pathlib import Path

DEFAULT_SEED = 20261130
PER_LEVEL = 40
OUT_PATH = Path(__file__).resolve().parent / "arithmetic.jsonl"

PEOPLE = [
    ("Maya", "she"), ("Liam", "he"), ("Aisha", "she"), ("Diego", "he"),
    ("Hana", "she"), ("Noah", "he"), ("Priya", "she"), ("Omar", "he"),
    ("Elena", "she"), ("Kenji", "he"), ("Zoe", "she"), ("Samuel", "he"),
    ("Fatima", "she"), ("Lucas", "he"), ("Ingrid", "she"), ("Mateo", "he"),
    ("Amara", "she"), ("Tomas", "he"), ("Chloe", "she"), ("Ravi", "he"),
    ("Grace", "she"), ("Jonah", "he"), ("Lena", "she"), ("Felix", "he"),
]


def person(rng: random.Random) -> tuple[str, str, str]:
    """Return (name, subject pronoun, capitalised subject pronoun)."""
    name, pron = rng.choice(PEOPLE)
    return name, pron, pron.capitalize()


def two_people(rng: random.Random) -> tuple[tuple[str, str], tuple[str, str]]:
    a, b = rng.sample(PEOPLE, 2)
    return a, b


def obj_pron(pron: str) -> str:
    return "her" if pron == "she" else "him"


def poss(pron: str) -> str:
    return "her" if pron == "she" else "his"


# --------------------------------------------------------------------------
# Level 1: one addition or subtraction, numbers under 20.
# --------------------------------------------------------------------------

def l1_gift_add(rng):
    (n1, p1), (n2, _) = two_people(rng)
    thing = rng.choice(["apples", "stickers", "pencils", "seashells", "crayons", "stamps"])
    a = rng.randint(2, 12)
    b = rng.randint(1, 19 - a)
    q = (f"{n1} has {a} {thing}. {n2} gives {obj_pron(p1)} {b} more {thing}. "
         f"How many {thing} does {n1} have now?")
    return q, f"{a} + {b}"


def l1_lost_sub(rng):
    name, _, _ = person(rng)
    thing = rng.choice(["marbles", "balloons", "coins", "buttons", "toy cars", "beads"])
    a = rng.randint(6, 19)
    b = rng.randint(1, a - 1)
    q = f"{name} had {a} {thing} and lost {b} of them. How many {thing} does {name} have left?"
    return q, f"{a} - {b}"


def l1_bus_add(rng):
    vehicle = rng.choice(["bus", "tram", "ferry", "train car"])
    stop = rng.choice(["the next stop", "the library stop", "the market stop", "the park stop"])
    a = rng.randint(3, 14)
    b = rng.randint(1, 19 - a)
    q = (f"There are {a} people on a {vehicle}. At {stop}, {b} more people get on "
         f"and nobody gets off. How many people are on the {vehicle} now?")
    return q, f"{a} + {b}"


def l1_eaten_sub(rng):
    food, eaters = rng.choice([
        ("cookies", "the children"), ("grapes", "the twins"), ("muffins", "the guests"),
        ("strawberries", "the kids"), ("crackers", "the players"),
    ])
    container, prep = rng.choice([("plate", "on"), ("bowl", "in"), ("tray", "on"), ("basket", "in")])
    a = rng.randint(5, 19)
    b = rng.randint(1, a - 1)
    q = (f"A {container} holds {a} {food}. {eaters.capitalize()} eat {b} of them. "
         f"How many {food} are still {prep} the {container}?")
    return q, f"{a} - {b}"


# --------------------------------------------------------------------------
# Level 2: one multiplication, or two add/sub steps, numbers under 100.
# --------------------------------------------------------------------------

def l2_boxes_mul(rng):
    name, _, _ = person(rng)
    box, thing = rng.choice([
        ("boxes", "crayons"), ("bags", "oranges"), ("packs", "pens"),
        ("cartons", "eggs"), ("jars", "candies"), ("cases", "juice bottles"),
    ])
    a = rng.randint(2, 9)
    b = rng.randint(3, 11)
    q = (f"{name} buys {a} {box} of {thing}. Each of the {box} holds {b} {thing}. "
         f"How many {thing} does {name} buy in total?")
    return q, f"{a} * {b}"


def l2_rows_mul(rng):
    place, rows, items = rng.choice([
        ("A classroom", "rows", "desks"), ("An orchard", "rows", "apple trees"),
        ("A cinema", "rows", "seats"), ("A parking lot", "lanes", "parking spaces"),
        ("A vegetable garden", "beds", "carrot plants"),
    ])
    a = rng.randint(3, 9)
    b = rng.randint(4, 11)
    q = (f"{place} has {a} {rows} with {b} {items} in each of the {rows}. "
         f"How many {items} are there altogether?")
    return q, f"{a} * {b}"


def l2_savings_addsub(rng):
    name, pron, Pron = person(rng)
    job = rng.choice(["mowing lawns", "walking dogs", "washing cars", "babysitting", "selling lemonade"])
    buy = rng.choice(["a book", "a board game", "a pair of shoes", "a kite", "a backpack"])
    a = rng.randint(10, 50)
    b = rng.randint(5, 40)
    c = rng.randint(5, min(a + b - 1, 90))
    q = (f"{name} had {a} dollars saved. {Pron} earned {b} more dollars {job}, "
         f"then spent {c} dollars on {buy}. How many dollars does {name} have now?")
    return q, f"{a} + {b} - {c}"


def l2_train_addsub(rng):
    a = rng.randint(20, 80)
    b = rng.randint(3, a - 5)
    c = rng.randint(2, min(40, 99 - (a - b)))
    station = rng.choice(["Oakwood", "Riverside", "Hillcrest", "Maple Bay", "Northgate"])
    q = (f"A train leaves the station with {a} passengers. At {station}, {b} passengers "
         f"get off and then {c} passengers get on. How many passengers are on the train now?")
    return q, f"{a} - {b} + {c}"


# --------------------------------------------------------------------------
# Level 3: two steps mixing multiplication and addition/subtraction.
# --------------------------------------------------------------------------

def l3_shop_change(rng):
    name, _, _ = person(rng)
    item = rng.choice(["notebooks", "sandwiches", "comic books", "paint brushes", "bus tickets"])
    a = rng.randint(2, 8)
    b = rng.randint(2, 12)
    bill = min(x for x in (20, 50, 100) if x > a * b)
    q = (f"{name} buys {a} {item} that cost {b} dollars each and pays with a "
         f"{bill}-dollar bill. How many dollars of change does {name} get?")
    return q, f"{bill} - {a} * {b}"


def l3_hens_eggs(rng):
    name, pron, Pron = person(rng)
    a = rng.randint(4, 15)
    b = rng.randint(3, 7)
    c = rng.randint(5, a * b - 2)
    q = (f"Farmer {name} has {a} hens, and each hen lays {b} eggs a week. "
         f"This week {name} sells {c} of the eggs. How many eggs are left?")
    return q, f"{a} * {b} - {c}"


def l3_sticker_packs(rng):
    name, pron, Pron = person(rng)
    thing = rng.choice(["stickers", "trading cards", "postcards", "baseball cards", "fridge magnets"])
    a = rng.randint(5, 40)
    b = rng.randint(2, 9)
    c = rng.randint(4, 12)
    q = (f"{name} has {a} {thing}. {Pron} buys {b} packs with {c} {thing} in each pack. "
         f"How many {thing} does {name} have now?")
    return q, f"{a} + {b} * {c}"


def l3_recipe_sugar(rng):
    name, pron, Pron = person(rng)
    bake, ingredient = rng.choice([
        ("cakes", "sugar"), ("loaves of bread", "flour"), ("pies", "butter"),
        ("trays of cookies", "flour"), ("batches of muffins", "sugar"),
    ])
    b = rng.randint(2, 6)
    a = rng.choice([25, 30, 40, 50, 60, 75, 80, 120, 150])
    c = rng.randint(10, 90)
    q = (f"{name} bakes {b} {bake}, and each one needs {a} grams of {ingredient}. "
         f"{Pron} also uses {c} grams of {ingredient} for decoration. "
         f"How many grams of {ingredient} does {name} use in total?")
    return q, f"{b} * {a} + {c}"


# --------------------------------------------------------------------------
# Level 4: three steps including an exact division.
# --------------------------------------------------------------------------

def l4_pizza_share(rng):
    name, pron, Pron = person(rng)
    while True:
        a = rng.randint(2, 6)
        b = rng.choice([6, 8, 10, 12])
        d = rng.randint(2, 8)
        per = rng.randint(2, 6)
        c = a * b - d * per
        if 1 <= c < a * b:
            break
    q = (f"{name} orders {a} pizzas, and each pizza is cut into {b} slices. "
         f"{c} slices are eaten at lunch. The remaining slices are shared equally "
         f"among {d} friends. How many slices does each friend get?")
    return q, f"({a} * {b} - {c}) // {d}"


def l4_bike_weeks(rng):
    name, pron, Pron = person(rng)
    goal = rng.choice(["a bike", "a guitar", "a tablet", "a pair of skates", "a telescope"])
    giver = rng.choice(["grandmother", "uncle", "aunt", "grandfather", "cousin"])
    w = rng.randint(3, 12)
    d = rng.choice([x for x in range(5, 26) if x != w])   # keep the answer out of the last sentence
    b = rng.randint(10, 80)
    c = rng.randint(5, 50)
    a = b + c + d * w
    q = (f"{name} wants {goal} that costs {a} dollars. {Pron} already has {b} dollars, "
         f"and {poss(pron)} {giver} gives {obj_pron(pron)} {c} dollars. If {name} saves {d} dollars "
         f"each week, how many weeks will it take to have exactly enough?")
    return q, f"({a} - {b} - {c}) // {d}"


def l4_flower_bunches(rng):
    name, pron, Pron = person(rng)
    flower = rng.choice(["tulips", "roses", "daisies", "sunflowers", "lilies"])
    a = rng.randint(3, 9)
    b = rng.randint(4, 12)
    d = rng.choice([3, 4, 5, 6, 8, 10])
    c = (d - (a * b) % d) + d * rng.randint(0, 3)
    q = (f"A gardener named {name} grows {a} rows of {b} {flower} and then picks {c} more "
         f"{flower} from a neighbour's field. All the {flower} are tied into bunches of {d}. "
         f"How many bunches does {name} make?")
    return q, f"({a} * {b} + {c}) // {d}"


def l4_pancake_batches(rng):
    name, pron, Pron = person(rng)
    c = rng.randint(2, 4)
    n = rng.randint(3, 9)
    total = c * n
    a = rng.randint(1, total - 1)
    b = total - a
    d = rng.randint(4, 10)
    q = (f"{name} has {a} eggs and buys {b} more. Each batch of pancakes uses {c} eggs "
         f"and makes {d} pancakes. If {name} uses all the eggs, how many pancakes does "
         f"{pron} make?")
    return q, f"({a} + {b}) // {c} * {d}"


# --------------------------------------------------------------------------
# Level 5: four or more steps, numbers in the hundreds.
# --------------------------------------------------------------------------

def l5_jacket_sale(rng):
    name, pron, Pron = person(rng)
    item = rng.choice(["jackets", "lamps", "chairs", "helmets", "suitcases"])
    p = rng.randrange(120, 500, 20)          # multiple of 20 -> any multiple-of-5 percent is exact
    pct = rng.choice([10, 15, 20, 25, 30, 40, 45, 50])
    n = rng.randint(2, 4)
    cost = (p - p * pct // 100) * n
    bill = (cost // 100 + 1 + rng.randint(0, 3)) * 100
    q = (f"{name} has {bill} dollars. A store sells {item} for {p} dollars each, and today "
         f"every price is reduced by {pct} percent. {name} buys {n} {item} at the sale price. "
         f"How many dollars does {name} have left?")
    return q, f"{bill} - ({p} - {p} * {pct} // 100) * {n}"


def l5_farm_twice(rng):
    name, pron, Pron = person(rng)
    a = rng.randint(120, 450)
    b = rng.randint(100, 2 * a - 50)
    c = rng.randint(100, 350)
    q = (f"Farmer {name} has {a} sheep and twice as many goats as sheep. {Pron} sells "
         f"{b} goats at the market and then buys {c} cows. How many sheep, goats and cows "
         f"does {name} have now in total?")
    return q, f"{a} + 2 * {a} - {b} + {c}"


def l5_factory_boxes(rng):
    toy = rng.choice(["toy robots", "teddy bears", "puzzles", "toy trucks", "yo-yos"])
    a = rng.randint(120, 500)
    d = rng.randint(3, 7)
    b = rng.choice([6, 8, 10, 12, 20, 24, 25])
    total = a * d
    r = total % b
    while r < 10:
        r += b
    r += b * rng.randint(0, 2)
    p = rng.randint(15, 60)
    q = (f"A factory makes {a} {toy} each day for {d} days. {r} of them are faulty and "
         f"thrown away. The rest are packed into boxes of {b}, and each box sells for {p} "
         f"dollars. How many dollars does the factory get if it sells every box?")
    return q, f"({a} * {d} - {r}) // {b} * {p}"


def l5_trip_budget(rng):
    place = rng.choice(["the science museum", "the aquarium", "the zoo", "the history museum", "the planetarium"])
    n = rng.randint(100, 300)
    t = rng.randint(6, 20)
    x = rng.randint(3, 9)
    y = rng.randint(4, 12)
    cost = (n + t) * x + n * y
    budget = (cost // 500 + 1 + rng.randint(0, 2)) * 500
    q = (f"A school has a budget of {budget} dollars for a trip to {place}. {n} students and "
         f"{t} teachers go. The bus costs {x} dollars per person, and entry tickets cost {y} "
         f"dollars per student, while teachers get in free. How many dollars of the budget "
         f"are left?")
    return q, f"{budget} - ({n} + {t}) * {x} - {n} * {y}"


def l5_wages_half(rng):
    name, pron, Pron = person(rng)
    thing = rng.choice(["concert tickets", "books", "plants", "video games", "train passes"])
    w = rng.randrange(100, 420, 2)
    k = rng.randint(3, 8)
    half = w * k // 2
    p = rng.randint(12, 60)
    m = rng.randint(2, max(2, min(12, (half - 1) // p)))
    assert m * p < half
    q = (f"{name} earns {w} dollars a week for {k} weeks. {Pron} puts half of the money "
         f"into savings. With the other half, {pron} buys {m} {thing} that cost {p} dollars "
         f"each. How many dollars of the other half are left?")
    return q, f"{w} * {k} // 2 - {m} * {p}"


TEMPLATES = {
    1: [l1_gift_add, l1_lost_sub, l1_bus_add, l1_eaten_sub],
    2: [l2_boxes_mul, l2_rows_mul, l2_savings_addsub, l2_train_addsub],
    3: [l3_shop_change, l3_hens_eggs, l3_sticker_packs, l3_recipe_sugar],
    4: [l4_pizza_share, l4_bike_weeks, l4_flower_bunches, l4_pancake_batches],
    5: [l5_jacket_sale, l5_farm_twice, l5_factory_boxes, l5_trip_budget, l5_wages_half],
}
ROUND_SIZE = PER_LEVEL * len(TEMPLATES)   # one round: PER_LEVEL items at each level


# --------------------------------------------------------------------------
# Safe evaluation and self-checks.
# --------------------------------------------------------------------------

_OPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b,
        ast.Mult: lambda a, b: a * b, ast.FloorDiv: lambda a, b: a // b}


def safe_eval(expression: str) -> tuple[int, list[int], list[type]]:
    """Evaluate with only + - * // on non-negative int literals.

    Returns (value, literals in source order, operator types).  Raises
    AssertionError on any other syntax or on an inexact division.
    """
    literals: list[int] = []
    ops: list[type] = []

    def ev(node: ast.AST) -> int:
        if isinstance(node, ast.Constant):
            assert type(node.value) is int and node.value >= 0, f"bad literal in {expression!r}"
            literals.append(node.value)
            return node.value
        if isinstance(node, ast.BinOp):
            assert type(node.op) in _OPS, f"disallowed operator in {expression!r}"
            left = ev(node.left)
            right = ev(node.right)
            ops.append(type(node.op))
            if isinstance(node.op, ast.FloorDiv):
                assert right != 0 and left % right == 0, f"inexact division in {expression!r}"
            return _OPS[type(node.op)](left, right)
        raise AssertionError(f"disallowed syntax {type(node).__name__} in {expression!r}")

    tree = ast.parse(expression, mode="eval")
    value = ev(tree.body)
    return value, literals, ops


_WORD_NUMBERS = {2: ("twice", "half"), 100: ("percent",)}


def check_item(item: dict) -> None:
    q, expr, level = item["question"], item["expression"], item["difficulty"]
    assert re.fullmatch(r"[0-9+\-*/() ]+", expr), f"unexpected characters in {expr!r}"
    value, literals, ops = safe_eval(expr)
    assert type(item["answer"]) is int and item["answer"] == value, item
    assert value >= 0, item
    assert q.endswith("?"), item
    # Numbers in the expression appear in the question (digits or a mapped word) ...
    q_numbers = {int(tok) for tok in re.findall(r"\d+", q)}
    for lit in literals:
        ok = lit in q_numbers or any(w in q.lower() for w in _WORD_NUMBERS.get(lit, ()))
        assert ok, f"literal {lit} of {expr!r} not in question: {q!r}"
    # ... and the question has no numbers the expression does not use.
    assert q_numbers <= set(literals), f"unused numbers {q_numbers - set(literals)} in {q!r}"
    # The final sentence must not give the answer away.
    last = re.split(r"(?<=[.!?])\s+", q)[-1]
    assert str(value) not in re.findall(r"\d+", last), f"answer shown in last sentence: {q!r}"
    # Difficulty shape.
    n_ops = len(ops)
    if level == 1:
        assert n_ops == 1 and ops[0] in (ast.Add, ast.Sub) and max(literals) < 20, item
    elif level == 2:
        assert max(literals) < 100 and value < 100, item
        assert (ops == [ast.Mult]) or (n_ops == 2 and set(ops) <= {ast.Add, ast.Sub}), item
    elif level == 3:
        assert n_ops == 2 and ast.Mult in ops and set(ops) & {ast.Add, ast.Sub}, item
        assert ast.FloorDiv not in ops, item
    elif level == 4:
        assert n_ops == 3 and ast.FloorDiv in ops, item
    elif level == 5:
        assert n_ops >= 4 and max(literals) >= 100, item


def round_seed(seed: int, r: int) -> int:
    """The seed of round ``r``: the seed itself for round 0, a sha256-derived one after."""
    if r == 0:
        return seed
    digest = hashlib.sha256(f"make_arithmetic/{seed}/round-{r}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def pair(item: dict) -> tuple[str, str]:
    """An item's (template, expression): what it asks, whatever names and objects fill the template."""
    return item["template"], item["expression"]


def draw_round(rng: random.Random, seen: set[str], pairs: set[tuple[str, str]] | None = None,
               exhausted: set[str] | None = None) -> list[dict]:
    """One round: PER_LEVEL items per level, interleaved by level, questions not in ``seen``.

    Adds the new questions to ``seen``.  With ``pairs`` (a set of (template, expression)), every
    item's pair is also new: not in ``pairs``, to which it is added.  A template that cannot give a
    new pair in 1000 draws is exhausted (recorded in ``exhausted``, skipped from then on): the level's
    slots then cycle over its other templates, so levels stay balanced.
    Items have no id yet.
    """
    exhausted = set() if exhausted is None else exhausted
    per_level: dict[int, list[dict]] = {}
    for level in sorted(TEMPLATES):
        items = []
        templates = TEMPLATES[level]
        for i in range(PER_LEVEL):
            while True:
                live = [fn for fn in templates if fn.__name__ not in exhausted]
                if not live:
                    raise AssertionError(f"every level-{level} template is exhausted: no new (template, expression) pair")
                fn = live[i % len(live)]
                for _attempt in range(1000):
                    question, expr = fn(rng)
                    if question not in seen and (pairs is None or (fn.__name__, expr) not in pairs):
                        break
                else:
                    if pairs is None:
                        raise AssertionError(f"could not draw a unique question from {fn.__name__}")
                    exhausted.add(fn.__name__)
                    continue
                break
            seen.add(question)
            if pairs is not None:
                pairs.add((fn.__name__, expr))
            value, _, _ = safe_eval(expr)
            items.append({
                "difficulty": level,
                "question": question,
                "expression": expr,
                "answer": value,
                "template": fn.__name__,
            })
        per_level[level] = items
    return [per_level[level][i] for i in range(PER_LEVEL) for level in sorted(per_level)]


def generate(seed: int = DEFAULT_SEED, n_items: int = ROUND_SIZE,
             exclude: set[tuple[str, str]] | None = None, first_id: int = 1) -> list[dict]:
    """``n_items`` checked items (a multiple of ROUND_SIZE); the first ROUND_SIZE never depend on ``n_items``.

    ``exclude``: None, or (template, expression) pairs no item may have; then every item's pair is
    also unique within the output.  ``first_id``: the number of the first id.
    """
    if n_items <= 0 or n_items % ROUND_SIZE:
        raise ValueError(f"items must be a positive multiple of {ROUND_SIZE}, not {n_items}")
    seen: set[str] = set()
    pairs = None if exclude is None else set(exclude)
    exhausted: set[str] = set()
    out = []
    for r in range(n_items // ROUND_SIZE):
        for it in draw_round(random.Random(round_seed(seed, r)), seen, pairs, exhausted):
            out.append({"id": f"arith-{first_id + len(out):03d}", **it})

    # Self-check the whole set before anything is written.
    assert len(out) == n_items
    assert len({it["id"] for it in out}) == len(out)
    assert len({it["question"] for it in out}) == len(out)
    if exclude is not None:
        assert len({pair(it) for it in out}) == len(out), "a (template, expression) pair repeats"
        assert not {pair(it) for it in out} & set(exclude), "an excluded (template, expression) pair was drawn"
    for start in range(0, n_items, ROUND_SIZE):
        chunk = out[start:start + ROUND_SIZE]
        for level in TEMPLATES:
            assert sum(it["difficulty"] == level for it in chunk) == PER_LEVEL
    for it in out:
        assert list(it) == ["id", "difficulty", "question", "expression", "answer", "template"]
        check_item(it)
    return out


def read_items(path: Path) -> list[dict]:
    """The items of a JSONL file written by this generator."""
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED)
    ap.add_argument("--items", type=int, default=ROUND_SIZE,
                    help=f"number of items, a multiple of {ROUND_SIZE} (default: {ROUND_SIZE})")
    ap.add_argument("--out", type=Path, default=None,
                    help="output file (default: data/arithmetic.jsonl; required with --items)")
    ap.add_argument("--skip", type=int, default=0,
                    help=f"write only the items after the first N (a multiple of {ROUND_SIZE}, less than --items)")
    ap.add_argument("--exclude", type=Path, nargs="*", default=None, metavar="FILE",
                    help="draw no (template, expression) pair found in these files, and none twice in the output "
                         "(given with no file: only the latter)")
    ap.add_argument("--first-id", type=int, default=1,
                    help="the number of the first id (default: 1, arith-001); with --exclude, no id may be in those files")
    args = ap.parse_args()
    if args.skip < 0 or args.skip % ROUND_SIZE or args.skip >= args.items:
        ap.error(f"--skip must be a multiple of {ROUND_SIZE} below --items, not {args.skip}")
    if args.items <= 0 or args.items % ROUND_SIZE:
        ap.error(f"--items must be a positive multiple of {ROUND_SIZE}, not {args.items}")
    if args.first_id < 1:
        ap.error(f"--first-id must be >= 1, not {args.first_id}")
    if args.out is None and (args.items != ROUND_SIZE or args.exclude is not None or args.first_id != 1):
        ap.error("--out is required with --items, --exclude or --first-id (data/arithmetic.jsonl holds the 200-item set)")
    out_path = args.out or OUT_PATH
    exclude, taken = None, set()
    if args.exclude is not None:
        old = [it for f in args.exclude for it in read_items(f)]
        exclude, taken = {pair(it) for it in old}, {it["id"] for it in old}
    items = generate(args.seed, args.items, exclude, args.first_id)[args.skip:]
    clash = sorted(taken & {it["id"] for it in items})
    if clash:
        ap.error(f"{len(clash)} ids are already in the excluded files, e.g. {clash[0]}: choose another --first-id")
    with open(out_path, "w", encoding="utf-8") as f:
        for it in items:
            f.write(json.dumps(it, ensure_ascii=False) + "\n")
    print(f"wrote {len(items)} items to {out_path}")


if __name__ == "__main__":
    main()
