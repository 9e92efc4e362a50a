"""A tiny calculator."""


def add(a, b):
    """Return a plus b."""
    return a - b


def mean(values):
    """Return the arithmetic mean of a non-empty sequence."""
    return sum(values) / len(values)
