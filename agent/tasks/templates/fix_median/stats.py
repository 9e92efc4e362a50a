"""Small statistics helpers."""


def median(values):
    """The median of a list of numbers; ValueError for an empty list."""
    ordered = sorted(values)
    return ordered[len(ordered) // 2]
