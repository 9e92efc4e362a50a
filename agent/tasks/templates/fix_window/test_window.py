import unittest

from window import window


class WindowTest(unittest.TestCase):
    def test_middle(self):
        self.assertEqual(window([1, 2, 3, 4, 5], 1, 3), [2, 3, 4])

    def test_single_item(self):
        self.assertEqual(window(["a", "b"], 0, 0), ["a"])

    def test_up_to_the_last_item(self):
        self.assertEqual(window([1, 2, 3], 1, 2), [2, 3])


if __name__ == "__main__":
    unittest.main()
