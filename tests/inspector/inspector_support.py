"""Shared by the inspector tests: the seed loop, and headless Chromium driven by Selenium.

The browser is the distribution's Chromium with its chromedriver (`apt-get install chromium
chromium-driver`; `make test` installs them where it can). Selenium is given both paths, so it
never runs Selenium Manager, which would try to download a browser.
"""

from __future__ import annotations

import os
import runpy
import shutil
import struct
import tempfile
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import openai
import pytest

from ptc_emulator.testing.server import PTCEmulator
from tests.support import validating_client

SEEDS = Path(__file__).parents[1] / "api" / "seeds"
EXPECTED = "sku_123: 42 units available against 31 requested, so the shortage is 0 units."
CHROMEDRIVER = os.environ.get("PTC_CHROMEDRIVER", "/usr/bin/chromedriver")
SCREENSHOT_ENV = "PTC_INSPECTOR_SCREENSHOT"
"""Where the seed test also saves its screenshot (docs/inspector.png is made this way)."""


def chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def browser_missing() -> str | None:
    """Why the browser tests cannot run here, or None."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[dev]')"
    if chromium() is None:
        return "no Chromium here (apt-get install chromium chromium-driver; `make test` does it as root)"
    if not Path(CHROMEDRIVER).is_file():
        return f"no chromedriver at {CHROMEDRIVER} (apt-get install chromium-driver)"
    return None


def run_seed_loop(emulator: PTCEmulator, *, store: bool = False) -> None:
    """The PTC guide's Python loop, verbatim, against `emulator` (store:false unless asked)."""
    source = (SEEDS / "python_loop.py").read_text(encoding="utf-8")
    client = validating_client(emulator, max_retries=0)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "python_loop.py"
        path.write_text(source if not store else source.replace("store=False", "store=True"), encoding="utf-8")
        with client, mock.patch.object(openai, "OpenAI", lambda: client), mock.patch("builtins.print"):
            runpy.run_path(str(path), run_name="__main__")


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Headless Chromium (a Selenium WebDriver), one per test module."""
    reason = browser_missing()
    if reason is not None:
        pytest.skip(reason)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(chromium())
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--window-size=1440,1500",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


def visible_text(driver: Any) -> str:
    """The page's text as a person sees it: Selenium's `text` leaves out what is not displayed."""
    from selenium.webdriver.common.by import By

    return str(driver.find_element(By.TAG_NAME, "body").text)


def wait_until(check: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
    """Poll `check` until it returns something truthy; fail naming `what` (generous deadline)."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except Exception as error:  # the page may be mid-render
            last = error
        else:
            if last:
                return last
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}; last seen: {last!r}")


def wait_for_text(driver: Any, *texts: str, timeout: float = 60.0) -> str:
    return str(
        wait_until(
            lambda: (lambda seen: seen if all(t in seen for t in texts) else None)(visible_text(driver)),
            f"the page to show {texts!r}",
            timeout,
        )
    )


def png_colours(png: bytes) -> set[bytes]:
    """The distinct pixel values of a PNG screenshot (8-bit RGB or RGBA, as Chromium writes them)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    at, chunks, header = 8, b"", None
    while at < len(png):
        (length,) = struct.unpack(">I", png[at : at + 4])
        kind, data = png[at + 4 : at + 8], png[at + 8 : at + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", data)
        elif kind == b"IDAT":
            chunks += data
        at += 12 + length
    assert header is not None and header[2] == 8 and header[3] in (2, 6) and header[6] == 0, header
    width, height, channels = header[0], header[1], 3 if header[3] == 2 else 4
    raw, stride = zlib.decompress(chunks), width * channels
    previous, colours = bytearray(stride), set()
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for x in range(stride):  # undo the row's filter (PNG spec, section 9)
            left = line[x - channels] if x >= channels else 0
            up, corner = previous[x], previous[x - channels] if x >= channels else 0
            if kind == 1:
                line[x] = (line[x] + left) & 0xFF
            elif kind == 2:
                line[x] = (line[x] + up) & 0xFF
            elif kind == 3:
                line[x] = (line[x] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[x] = (line[x] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 0xFF
        colours.update(bytes(line[x : x + 3]) for x in range(0, stride, channels))
        previous = line
    return colours
