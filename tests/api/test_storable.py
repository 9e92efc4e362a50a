"""What goes into a ``jsonb`` column of the service's tables (``api.store.rows.storable``): a
graph's values may hold what ``jsonb`` cannot (NUL characters, NaN, infinities), and must not
keep a run from ending."""

from __future__ import annotations

import math

import psycopg
from psycopg.types.json import Jsonb

from api.store.rows import storable


def test_nul_and_non_finite_numbers_are_made_storable(database_url: str) -> None:
    values = {"a\0b": ["x\0", math.nan, math.inf, -math.inf, 1.5, {"n": [math.nan]}]}
    cleaned = storable(values)
    assert cleaned == {"a\ufffdb": ["x\ufffd", None, None, None, 1.5, {"n": [None]}]}
    with psycopg.connect(database_url) as conn:
        [(stored,)] = conn.execute("SELECT %s::jsonb", (Jsonb(cleaned),)).fetchall()
        assert stored == cleaned
        try:
            conn.execute("SELECT %s::jsonb", (Jsonb(values),))
        except psycopg.DataError:
            pass  # what it guards against: jsonb refuses NUL and NaN
        else:
            raise AssertionError("jsonb took NUL and NaN: the guard would not be needed")
