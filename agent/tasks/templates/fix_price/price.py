"""Prices are kept in cents and shown in dollars."""


def format_price(cents):
    """Cents as dollars with two decimals: 1250 -> '$12.50', 5 -> '$0.05'."""
    return "$%d.%d" % (cents // 100, cents % 100)
