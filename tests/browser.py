"""A headless Debian Chromium for the browser tests, installed from the Debian mirror when missing.

Nothing comes from a browser vendor: the browser and its driver are Debian's `chromium` and
`chromium-driver` packages, and Selenium is pointed at that chromedriver explicitly (so Selenium
Manager never downloads one). Where neither can be found nor installed (not root, no apt), the
reason is returned and the tests skip with it.
"""

from __future__ import annotations

import os
import shutil
import subprocess

PACKAGES = ["chromium", "chromium-driver"]


def find() -> tuple[str | None, str | None]:
    """(browser, driver) paths, None for what is not installed."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    return browser, shutil.which("chromedriver")


def install() -> str | None:
    """Install Debian's chromium and chromium-driver if missing; None when both are there, else
    why they cannot be."""
    if all(find()):
        return None
    if not shutil.which("apt-get"):
        return "no chromium/chromedriver and no apt-get to install them (install a chromium and its driver)"
    if os.geteuid() != 0:
        return "no chromium/chromedriver, and installing them needs root: apt-get install chromium chromium-driver"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    command = ["apt-get", "install", "-y", "--no-install-recommends", *PACKAGES]
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:  # a stale package list: refresh it once and try again
        subprocess.run(["apt-get", "update"], env=env, capture_output=True, text=True)
        done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0 or not all(find()):
        return f"apt-get install {' '.join(PACKAGES)} failed: {done.stderr.strip()[-500:]}"
    return None
