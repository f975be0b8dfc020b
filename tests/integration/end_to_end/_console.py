"""``pgshovel-admin serve`` as a child process, its pages fetched as a browser would, screenshots.

The console is started on a free loopback port (``--port 0``) and its URL
read from the line it prints; pages are fetched with urllib (the headers
included) and photographed by Debian's headless Chromium.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from pgshovel.sandbox import ChildProcess, SandboxConnection

ADMIN = Path(sys.executable).with_name("pgshovel-admin")
URL = re.compile(r"console on (http://\S+) ")


class ConsoleProcess(ChildProcess):
    """``pgshovel-admin serve --port 0`` against the sandbox's ZooKeeper."""

    def __init__(self, sandbox: SandboxConnection, log: Path, *arguments: str) -> None:
        environment = dict(os.environ, PGSHOVEL_ZOOKEEPER_HOSTS=sandbox.zookeeper_hosts)
        super().__init__(
            "pgshovel-admin serve",
            [str(ADMIN), "serve", "--port", "0", *arguments],
            log,
            env=environment,
        )

    def url(self, timeout: float = 60.0) -> str:
        """The URL the console printed once it listens."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = URL.search(self.output())
            if found:
                return found.group(1)
            if not self.running():
                raise AssertionError(f"the console exited:\n{self.output()}")
            time.sleep(0.1)
        raise AssertionError(f"the console printed no URL within {timeout}s:\n{self.output()}")


def fetch(url: str, host: str | None = None) -> tuple[int, dict[str, str], str]:
    """(status, headers, body) of a GET; ``host`` overrides the Host header."""
    request = urllib.request.Request(url, headers={"Host": host} if host else {})  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310
            return response.status, dict(response.headers), response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read().decode()


def fetch_json(url: str) -> Any:
    status, _headers, body = fetch(url)
    assert status == 200, (status, body)
    return json.loads(body)


def screenshot(url: str, path: Path, width: int = 1400, height: int = 1500) -> Path:
    """A PNG of ``url`` as headless Chromium renders it (no sandbox: the tests run as root)."""
    chromium = shutil.which("chromium")
    assert chromium is not None, "chromium is missing: make setup installs it"
    done = subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--hide-scrollbars",
            f"--user-data-dir={path.parent / 'chromium-profile'}",
            f"--screenshot={path}",
            f"--window-size={width},{height}",
            url,
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0 and path.is_file(), done.stdout + done.stderr
    return path
