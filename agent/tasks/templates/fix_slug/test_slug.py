import unittest

from slug import slugify


class SlugifyTest(unittest.TestCase):
    def test_words(self):
        self.assertEqual(slugify("Hello World"), "hello-world")

    def test_punctuation_is_dropped(self):
        self.assertEqual(slugify("Hello, World!"), "hello-world")

    def test_runs_of_spaces(self):
        self.assertEqual(slugify("  many   spaces  "), "many-spaces")

    def test_symbols_and_digits(self):
        self.assertEqual(slugify("Rock & Roll 2"), "rock-roll-2")

    def test_empty(self):
        self.assertEqual(slugify(""), "")


if __name__ == "__main__":
    unittest.main()
