"""The inspector in headless Chromium: what a person sees after the seed scenario, a 400's
near-miss report, live updates, and a server started with --api-key."""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from ptc_emulator.api.settings import Settings
from ptc_emulator.testing.server import EmulatorServer, PTCEmulator
from tests.inspector.inspector_support import (
    EXPECTED,
    SCREENSHOT_ENV,
    browser,
    png_colours,
    run_seed_loop,
    visible_text,
    wait_for_text,
    wait_until,
)

__all__ = ["browser"]  # the fixture, imported for this module


def by(kind: str) -> Any:
    from selenium.webdriver.common.by import By

    return getattr(By, kind)


def test_the_seed_conversation_as_a_person_sees_it(ptc_emulator: PTCEmulator, browser: Any, tmp_path: Path) -> None:
    run_seed_loop(ptc_emulator)  # store:false: the client replays the program and the calls
    browser.get(ptc_emulator.inspector_url)
    seen = wait_for_text(browser, EXPECTED, "get_inventory", "get_demand")

    # The program's code, as written by the scripted model, with its line numbers.
    assert 'tools.get_inventory({ sku: "sku_123" }),' in seen
    assert 'tools.get_demand({ sku: "sku_123" }),' in seen
    assert "const [stock, demand] = await Promise.all([" in seen
    # One pause with both calls: name, arguments, caller, route and the outputs that came back.
    assert "Pause 1 — response #" in seen and ": 2 calls" in seen
    calls = browser.find_elements(by("CSS_SELECTOR"), ".program tr.call")
    assert [row.find_element(by("TAG_NAME"), "strong").text for row in calls] == ["get_inventory", "get_demand"]
    inventory, demand = (row.text for row in calls)
    assert '"sku": "sku_123"' in inventory and '"available_units": 42' in inventory and "program call_" in inventory
    assert '"sku": "sku_123"' in demand and '"requested_units": 31' in demand
    assert "came back in request #" in inventory
    # program_output, the final message, the status and how the requests were tied together.
    assert '"shortage_units": 0' in seen
    final = browser.find_element(by("ID"), "final")
    assert final.is_displayed() and EXPECTED in final.text
    head = browser.find_element(by("CSS_SELECTOR"), ".conv-head").text
    assert "completed" in head and "inventory__sku_123" in head and "store:false replay" in head
    figures = browser.find_element(by("ID"), "figures").text
    assert "requests" in figures and "tokens in / out" in figures and "function_call (program) × 2" in figures

    # The screenshot: a person sees highlighted code (several colours), not a blank page.
    page = browser.get_screenshot_as_png()
    (tmp_path / "inspector.png").write_bytes(page)
    if os.environ.get(SCREENSHOT_ENV):
        Path(os.environ[SCREENSHOT_ENV]).write_bytes(page)
    code = browser.find_element(by("CSS_SELECTOR"), ".program pre.code")
    assert code.is_displayed()
    assert len(png_colours(code.screenshot_as_png)) > 20  # text in several colours on a dark ground
    tool = browser.find_element(by("CSS_SELECTOR"), ".program .tok-tool")
    assert tool.text == "get_inventory"
    assert tool.value_of_css_property("color") != code.value_of_css_property("color")


def test_raw_json_and_curl_are_one_click_away(ptc_emulator: PTCEmulator, browser: Any) -> None:
    run_seed_loop(ptc_emulator)
    browser.get(ptc_emulator.inspector_url)
    wait_for_text(browser, EXPECTED)
    first = browser.find_element(by("CSS_SELECTOR"), ".timeline li.entry")
    first.find_element(by("XPATH"), ".//button[text()='Response JSON']").click()
    raw = first.find_element(by("CSS_SELECTOR"), ".raw")
    wait_until(lambda: raw.is_displayed() and '"object": "response"' in raw.text, "the raw response")
    assert '"type": "program"' in raw.text

    first.find_element(by("XPATH"), ".//button[text()='Copy as curl']").click()
    dialog = browser.find_element(by("ID"), "copy-dialog")
    wait_until(dialog.is_displayed, "the curl dialog")
    command = browser.find_element(by("ID"), "copy-text").get_attribute("value")
    assert command.startswith("curl ") and "/v1/responses" in command and ptc_emulator.scope in command
    browser.find_element(by("CSS_SELECTOR"), "#copy-dialog button").click()
    # The command runs as copied, and the emulator answers it the same way.
    done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert '"get_inventory"' in done.stdout and '"status":"completed"' in done.stdout.replace(" ", "")


@pytest.mark.ptc_strict(unmatched=False)  # the 400 is what the page shows
def test_a_400_shows_its_near_miss_report(ptc_emulator: PTCEmulator, browser: Any) -> None:
    client = ptc_emulator.client(max_retries=0)
    with pytest.raises(openai.BadRequestError):
        client.responses.create(model="gpt-6-astra", input="Compare inventory with demand for sku_9", tools=[])
    browser.get(ptc_emulator.inspector_url)
    seen = wait_for_text(browser, "No scenario matched — near misses")
    report = browser.find_element(by("CSS_SELECTOR"), ".nearmiss").text
    assert "inventory__sku_123" in report
    assert "the request does not declare the function tool 'get_inventory'" in report
    assert "400" in seen and "failed" in seen and "no_scenario_matched" in seen


def test_the_list_updates_live(ptc_emulator: PTCEmulator, browser: Any) -> None:
    browser.get(ptc_emulator.inspector_url)
    wait_for_text(browser, "No conversations yet")
    wait_until(lambda: browser.find_element(by("ID"), "live").text == "live", "the event stream")
    ptc_emulator.add_scenario({"match": {"input": "(?i)^ping"}, "turns": [{"message": "pong, live"}]})
    ptc_emulator.client().responses.create(model="m", input="ping from the live test <b>not markup</b>")
    seen = wait_for_text(browser, "ping from the live test", "pong, live")  # no reload
    assert "<b>not markup</b>" in seen  # what a client sent is shown as text, never as HTML
    assert "1 conversation, newest first" in seen


@pytest.fixture(scope="module")
def keyed_server() -> Iterator[EmulatorServer]:
    with tempfile.TemporaryDirectory() as folder:
        settings = Settings(
            data_dir=Path(folder), store="memory", pool_size=1, api_key="sk-inspector-key", bundled_fixtures=True
        )
        server = EmulatorServer(settings).start()
        try:
            yield server
        finally:
            server.stop()


def test_the_page_works_with_an_api_key(keyed_server: EmulatorServer, browser: Any) -> None:
    emulator = PTCEmulator(keyed_server.base_url, api_key="sk-inspector-key")
    try:
        run_seed_loop(emulator)
        # Without the key the page asks for it; the data stays behind the key.
        browser.get(emulator.inspector_url)
        dialog = browser.find_element(by("ID"), "key-dialog")
        wait_until(dialog.is_displayed, "the API key prompt")
        assert "was started with --api-key" in dialog.text
        assert EXPECTED not in visible_text(browser)
        field = browser.find_element(by("ID"), "key-input")
        field.send_keys("sk-wrong")
        browser.find_element(by("ID"), "key-ok").click()
        wait_until(dialog.is_displayed, "the prompt again, for a wrong key")
        field.clear()
        field.send_keys("sk-inspector-key")
        browser.find_element(by("ID"), "key-ok").click()
        wait_for_text(browser, EXPECTED, "get_demand")
        wait_until(lambda: browser.find_element(by("ID"), "live").text == "live", "the authenticated event stream")

        # A link carrying the key in its fragment: kept in the tab, gone from the address bar.
        browser.execute_script("sessionStorage.clear()")
        browser.get("about:blank")
        browser.get(emulator.inspector_url.replace("#", "#key=sk-inspector-key&"))
        wait_for_text(browser, EXPECTED)
        assert "sk-inspector-key" not in browser.current_url
        assert browser.execute_script("return sessionStorage.getItem('ptc-emulator-api-key')") == "sk-inspector-key"
        # Live updates arrive over the authenticated stream too.
        emulator.add_scenario({"match": {"input": "(?i)^ping"}, "turns": [{"message": "pong behind a key"}]})
        emulator.client().responses.create(model="m", input="ping with a key")
        wait_for_text(browser, "ping with a key")  # in the list, without a reload
        browser.find_element(by("XPATH"), "//ol[@id='conversations']/li[1]").click()
        wait_for_text(browser, "pong behind a key")
        root = keyed_server.base_url[: -len("/v1")]
        assert httpx.get(f"{root}/_emulator/inspector/conversations", timeout=30).status_code == 401
    finally:
        browser.execute_script("sessionStorage.clear()")
        emulator.reset()
        emulator.close()


def test_faults_retries_and_reasoning_are_shown(ptc_emulator: PTCEmulator, browser: Any) -> None:
    from tests.inspector.test_api import FAULTY, ping

    ptc_emulator.add_scenario(FAULTY)
    assert ping(ptc_emulator).output_text == "pong"
    browser.get(ptc_emulator.inspector_url)
    seen = wait_for_text(browser, "Injected fault: http_error 429 (2 of 2)", "A ping wants a pong.")
    assert "Injected fault: http_error 429 (1 of 2)" in seen
    assert "REASONING" in seen and "retry" in seen
    statuses = [
        e.find_element(by("CSS_SELECTOR"), ".badge").text
        for e in browser.find_elements(by("CSS_SELECTOR"), ".timeline li.entry")
    ]
    assert statuses == ["429", "429", "200"]
