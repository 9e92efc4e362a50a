"""URL slugs for article titles."""


def slugify(title):
    """A URL slug: the lowercase words (letters and digits) of title joined by single hyphens."""
    return title.lower().replace(" ", "-")
