"""Headless Chromium (Debian's chromium + chromium-driver) driven by Selenium, and screenshot helpers."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

# The server tests' helpers (sample project, scripted fake replies) serve the browser tests too.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))
from server_helpers import Stall, decide, make_project, plan  # noqa: E402

__all__ = ["Stall", "decide", "make_project", "plan", "start_browser", "screenshot", "wait"]

CHROMIUM = os.environ.get("MIDDLE_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("MIDDLE_TEST_CHROMEDRIVER", "/usr/bin/chromedriver")
ARTIFACTS = Path(os.environ.get("MIDDLE_TEST_ARTIFACTS") or Path(__file__).parent / "artifacts")
LAPTOP, PHONE = (1280, 800), (390, 844)
WAIT_S = 120  # the longest a page may take to show what the test waits for (a whole ticket run)


def start_browser() -> Any:
    """A headless Chromium session; a missing browser skips, or fails under CI (which installs it)."""
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not shutil.which(p)]
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError as exc:
        missing.append(f"selenium ({exc})")
    if missing:
        why = f"browser tests need {', '.join(missing)}: apt-get install chromium chromium-driver"
        if os.environ.get("CI"):
            pytest.fail(f"CI=true but {why}")
        pytest.skip(why)
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--no-first-run", "--disable-extensions", f"--window-size={LAPTOP[0]},{LAPTOP[1]}"):
        options.add_argument(arg)
    # The driver comes from Debian's package, so Selenium Manager never downloads one.
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def screenshot(driver: Any, name: str) -> list[Path]:
    """Save the whole page at laptop and phone width as artifacts/<name>-laptop.png / -phone.png."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    saved = []
    for label, (width, height) in (("laptop", LAPTOP), ("phone", PHONE)):
        driver.set_window_size(width, height)
        full = driver.execute_script("return document.documentElement.scrollHeight")
        driver.set_window_size(width, min(max(height, full + 140), 5000))
        path = ARTIFACTS / f"{name}-{label}.png"
        driver.save_screenshot(str(path))
        saved.append(path)
    driver.set_window_size(*LAPTOP)
    return saved


def wait(driver: Any, condition: Callable[[Any], Any], what: str, timeout: float = WAIT_S) -> Any:
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    # Live pages replace fragments while we look: a vanished element just means "look again".
    return WebDriverWait(driver, timeout, poll_frequency=0.2,
                         ignored_exceptions=(NoSuchElementException, StaleElementReferenceException)
                         ).until(condition, message=f"waiting for {what}")
