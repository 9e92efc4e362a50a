import unittest

from price import format_price


class FormatPriceTest(unittest.TestCase):
    def test_whole_and_cents(self):
        self.assertEqual(format_price(1250), "$12.50")

    def test_cents_only(self):
        self.assertEqual(format_price(5), "$0.05")

    def test_whole_dollars(self):
        self.assertEqual(format_price(100), "$1.00")

    def test_large(self):
        self.assertEqual(format_price(199999), "$1999.99")


if __name__ == "__main__":
    unittest.main()
