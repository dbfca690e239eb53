"""The BM25 ranking behind server-executed tool search, on its own (no server)."""

from __future__ import annotations

from ptc_emulator.emulator.tools.search import Document, rank, words

CATALOG = [
    Document("crm.list_open_orders", "list_open_orders List open orders for a customer ID. crm CRM tools."),
    Document("shipping.get_delivery_eta", "get_delivery_eta Return the ETA for an order. shipping Delivery tools."),
    Document("get_weather", "get_weather Return the weather forecast for a city. city"),
    Document("get_stock_price", "get_stock_price Return the latest stock price for a ticker symbol."),
]


def test_identifiers_read_as_words() -> None:
    assert words("get_delivery_eta") == "get delivery eta"
    assert words("getDeliveryETA v2") == "get Delivery ETA v 2"


def test_the_best_match_comes_first_and_non_matches_never() -> None:
    assert rank("weather forecast", CATALOG, 5) == ["get_weather"]
    assert rank("delivery ETA", CATALOG, 5) == ["shipping.get_delivery_eta"]
    assert rank("open orders of a customer", CATALOG, 5)[0] == "crm.list_open_orders"


def test_plurals_fold_and_stop_words_score_nothing() -> None:
    assert rank("stock prices", CATALOG, 5) == ["get_stock_price"]
    assert rank("the a for", CATALOG, 5) == []
    assert rank("calendar", CATALOG, 5) == []
    assert rank("", CATALOG, 5) == []


def test_limit_and_an_empty_catalog() -> None:
    assert len(rank("return", CATALOG, 2)) == 2
    assert rank("weather", [], 5) == []
