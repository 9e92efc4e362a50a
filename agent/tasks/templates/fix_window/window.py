"""Slices of a list by inclusive positions."""


def window(items, start, end):
    """The items from position start to position end, both included."""
    return items[start:end]
