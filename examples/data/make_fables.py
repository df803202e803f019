#!/usr/bin/env python3
"""Writes fables.txt: short animal fables from a small grammar, the built-in training text of
examples/local/. Seeded, so the same file comes out every time:

    python3 examples/data/make_fables.py > examples/data/fables.txt

English spelling, word order, names that recur within a story and stock phrases give a
byte-level model plenty to learn beyond byte frequencies (the unigram entropy)."""
import random
import sys

ANIMALS = ["fox", "crow", "hare", "tortoise", "lion", "mouse", "ant", "grasshopper", "wolf",
           "lamb", "owl", "goat", "frog", "heron", "bear", "bee", "dog", "cat", "horse", "deer",
           "eagle", "sparrow", "otter", "badger", "squirrel", "rabbit", "duck", "swan"]
NAMES = ["Ada", "Bram", "Cora", "Dov", "Elsa", "Finn", "Greta", "Hugo", "Ines", "Jonas", "Kira",
         "Lars", "Mira", "Nils", "Olga", "Piet", "Rosa", "Sven", "Tove", "Ulla", "Vera", "Wim"]
PLACES = ["by the river", "in the old forest", "on the green hill", "near the mill",
          "at the edge of the marsh", "under the tall oak", "in the quiet valley",
          "beside the stone bridge", "in the farmer's field", "on the windy shore"]
TIMES = ["One morning", "Late one evening", "On a cold winter day", "In the heat of summer",
         "When the first snow fell", "At the end of the harvest", "Early one spring",
         "On a stormy night", "Long ago", "One bright afternoon"]
TRAITS = ["proud", "clever", "lazy", "kind", "greedy", "patient", "boastful", "honest",
          "curious", "careful", "foolish", "brave", "humble", "quick"]
FOODS = ["a piece of cheese", "a basket of berries", "a heap of grain", "a honeycomb",
         "a fat fish", "a bunch of grapes", "a crust of bread", "a pile of acorns"]
THINGS = ["a golden key", "a silver bell", "a lost ring", "a wooden box", "a red feather",
          "a smooth stone", "an old map", "a broken cart"]
MORALS = [
    "Slow and steady wins the race.",
    "Do not count your chickens before they hatch.",
    "A friend in need is a friend indeed.",
    "Pride goes before a fall.",
    "Look before you leap.",
    "Little friends may prove great friends.",
    "It is wise to prepare today for the needs of tomorrow.",
    "Honesty is the best policy.",
    "Those who flatter you want something from you.",
    "United we stand, divided we fall.",
    "Kindness is never wasted.",
    "Greed often overreaches itself.",
]


def a_or_an(word):
    return ("an " if word[0] in "aeiou" else "a ") + word


def fable(rng):
    first, second = rng.sample(ANIMALS, 2)
    name1, name2 = rng.sample(NAMES, 2)
    trait1, trait2 = rng.sample(TRAITS, 2)
    place, time = rng.choice(PLACES), rng.choice(TIMES)
    food, thing = rng.choice(FOODS), rng.choice(THINGS)
    moral = rng.choice(MORALS)
    title = f"The {first.capitalize()} and the {second.capitalize()}"
    lines = [title, ""]
    lines.append(f"{time}, {a_or_an(trait1)} {first} named {name1} lived {place}. "
                 f"{name1} the {first} had {food} and was very pleased with it.")
    lines.append(f"{a_or_an(trait2).capitalize()} {second} named {name2} came by and saw "
                 f"{food}. \"Good day, {name1},\" said {name2} the {second}. "
                 f"\"What a fine {first} you are!\"")
    events = [
        f"{name1} the {first} did not answer, and held on to {food}.",
        f"\"Will you share it with me?\" asked {name2}. \"I have walked all day.\"",
        f"{name1} laughed and said, \"Why should I share with {a_or_an(second)}?\"",
        f"Then {name2} the {second} found {thing} {rng.choice(PLACES)}.",
        f"\"Look,\" said {name2}, \"I found {thing}. Shall we look after it together?\"",
        f"{name1} the {first} thought for a long time, and then agreed.",
        f"The two of them worked from morning until night, and the {first} grew tired.",
        f"When the rain came, the {second} had a dry home, but the {first} had none.",
        f"{name2} the {second} was {trait2}, and let {name1} stay until the rain stopped.",
        f"So the {first} and the {second} became friends, and shared {food}.",
    ]
    start = rng.randrange(0, 3)
    count = rng.randrange(4, 8)
    lines.extend(events[start:start + count])
    lines.append(f"Moral: {moral}")
    lines.append("")
    return "\n".join(lines) + "\n"


def main():
    rng = random.Random(20240601)
    target_bytes = 400_000
    out, size = [], 0
    while size < target_bytes:
        text = fable(rng)
        out.append(text)
        size += len(text.encode())
    sys.stdout.write("".join(out))


if __name__ == "__main__":
    main()
