"""The HTML reports open in a real headless Chromium without console errors and show every section.

Chromium (the Debian package ``chromium``, no vendor-downloaded browser) is started with
``--headless=new --remote-debugging-port=0`` and driven over the DevTools protocol with
``websocket-client``: ``Runtime``/``Log`` events collect console messages, uncaught exceptions
and browser-side errors; ``Runtime.evaluate`` reads the *rendered* DOM (section headings with a
layout box, images decoded with ``naturalWidth > 0``). The same checker must flag a deliberately
broken page, so the test can fail.

Browser availability: a session fixture looks for ``chromium`` (or ``$ROBIDENT_CHROMIUM``). When
it is missing and ``CI=true``, it runs ``apt-get update && apt-get install -y chromium`` (as root,
or through password-less ``sudo -n``) and a browser that still cannot be had FAILS the test; outside
CI the tests are skipped with the reason.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, Sequence

import pytest

from robident_twin.report import html as hr

BROWSER_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
APT_PACKAGES = ("chromium", "fonts-liberation")
START_TIMEOUT_S = 30.0  # browser start until DevToolsActivePort is written
PAGE_TIMEOUT_S = 30.0  # navigation + load event + DOM query of one page


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def find_browser() -> str | None:
    """A Chromium executable: ``$ROBIDENT_CHROMIUM`` or the first of BROWSER_NAMES on PATH."""
    override = os.environ.get("ROBIDENT_CHROMIUM")
    if override:
        return shutil.which(override)
    for name in BROWSER_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


def apt_install_browser(timeout_update_s: float = 300, timeout_install_s: float = 900) -> tuple[bool, str]:
    """``apt-get update && apt-get install -y chromium`` as root or via ``sudo -n``; (ok, captured log)."""
    if shutil.which("apt-get") is None:
        return False, "apt-get not found (not a Debian/Ubuntu machine)"
    if os.geteuid() == 0:
        prefix: list[str] = []
    elif shutil.which("sudo") and subprocess.run(["sudo", "-n", "true"], capture_output=True).returncode == 0:
        prefix = ["sudo", "-n"]
    else:
        return False, "not root and no password-less sudo: cannot run apt-get install"
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    log = []
    for cmd, timeout_s in ((prefix + ["apt-get", "update"], timeout_update_s),
                           (prefix + ["apt-get", "install", "-y", "--no-install-recommends", *APT_PACKAGES],
                            timeout_install_s)):
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env)
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            log.append(f"$ {' '.join(cmd)}\ntimed out after {timeout_s:.0f} s\n{out[-3000:]}")
            return False, "\n".join(log)
        log.append(f"$ {' '.join(cmd)}   (exit {p.returncode})\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
        if p.returncode != 0:
            return False, "\n".join(log)
    return True, "\n".join(log)


# ----------------------------------------------------------------------------- DevTools client

class BrowserError(RuntimeError):
    pass


@dataclass
class PageCheck:
    """What the browser saw on one page."""

    url: str
    title: str = ""
    sections: list[dict[str, Any]] = field(default_factory=list)  # id, heading, visible
    images: list[dict[str, Any]] = field(default_factory=list)  # alt, complete, naturalWidth, visible
    figures: list[dict[str, Any]] = field(default_factory=list)  # inline SVG figures: fig, width, visible
    messages: list[str] = field(default_factory=list)  # every console / log message, "level: text"
    errors: list[str] = field(default_factory=list)  # console errors, uncaught exceptions, error log entries


_DOM_QUERY = """(async () => {
  await Promise.all(Array.from(document.images, im => im.decode().catch(() => null)));
  const shown = el => { const r = el.getBoundingClientRect(), cs = getComputedStyle(el);
    return r.width > 0 && r.height > 0 && cs.display !== 'none' && cs.visibility !== 'hidden'; };
  return {
    title: document.title,
    sections: Array.from(document.querySelectorAll('section'), s => {
      const h = s.querySelector('h2');
      return {id: s.id, heading: h ? h.innerText.trim() : '', visible: shown(s) && !!h && shown(h)}; }),
    images: Array.from(document.images, im => ({alt: im.alt, complete: im.complete,
                                               naturalWidth: im.naturalWidth, visible: shown(im)})),
    figures: Array.from(document.querySelectorAll('svg[data-fig]'), f => ({fig: f.dataset.fig,
                                               width: f.getBoundingClientRect().width, visible: shown(f)}))
  };
})()"""


class Chromium:
    """A headless Chromium process and one DevTools websocket to it (flattened target sessions)."""

    def __init__(self, exe: str, workdir: Path):
        import websocket  # websocket-client (the `test` extra)

        self._websocket = websocket
        profile = workdir / "profile"
        profile.mkdir(parents=True, exist_ok=True)
        self.log_path = workdir / "chromium.log"
        self._log = open(self.log_path, "wb")
        args = [exe, "--headless=new", "--remote-debugging-port=0", f"--user-data-dir={profile}", "--no-sandbox",
                "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run", "--no-default-browser-check",
                "--disable-extensions", "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--mute-audio", "--window-size=1280,900", "about:blank"]
        self.proc = subprocess.Popen(args, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + START_TIMEOUT_S
        lines: list[str] = []
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise BrowserError(f"{exe} exited with {self.proc.returncode} at start:\n{self.log_tail()}")
            if port_file.is_file():
                lines = port_file.read_text().split()
                if len(lines) >= 2:
                    break
            time.sleep(0.1)
        else:
            self.close()
            raise BrowserError(f"{exe}: no {port_file} after {START_TIMEOUT_S:.0f} s:\n{self.log_tail()}")
        self.ws = websocket.create_connection(f"ws://127.0.0.1:{lines[0]}{lines[1]}", timeout=PAGE_TIMEOUT_S,
                                              suppress_origin=True, http_no_proxy=["127.0.0.1", "localhost"])
        self._id = 0
        self.events: list[dict] = []
        self.version = self.send("Browser.getVersion").get("product", "?")

    def log_tail(self, n: int = 3000) -> str:
        self._log.flush()
        return self.log_path.read_bytes()[-n:].decode(errors="replace")

    def _recv(self, deadline: float) -> dict | None:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        self.ws.settimeout(left)
        try:
            return json.loads(self.ws.recv())
        except self._websocket.WebSocketTimeoutException:
            return None

    def send(self, method: str, params: dict | None = None, session: str | None = None,
             timeout_s: float = PAGE_TIMEOUT_S) -> dict:
        self._id += 1
        msg: dict[str, Any] = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        self.ws.send(json.dumps(msg))
        deadline = time.monotonic() + timeout_s
        while (m := self._recv(deadline)) is not None:
            if m.get("id") == self._id:
                if "error" in m:
                    raise BrowserError(f"{method}: {m['error']}")
                return m.get("result", {})
            self.events.append(m)
        raise BrowserError(f"{method}: no answer within {timeout_s:.0f} s")

    def wait_event(self, method: str, session: str, timeout_s: float = PAGE_TIMEOUT_S) -> dict:
        deadline = time.monotonic() + timeout_s
        seen = 0
        while True:
            for m in self.events[seen:]:
                if m.get("method") == method and m.get("sessionId") == session:
                    return m
            seen = len(self.events)
            m = self._recv(deadline)
            if m is None:
                raise BrowserError(f"no {method} within {timeout_s:.0f} s")
            self.events.append(m)

    def drain(self, seconds: float) -> None:
        """Collect the events that arrive within ``seconds`` (late console messages)."""
        deadline = time.monotonic() + seconds
        while (m := self._recv(deadline)) is not None:
            self.events.append(m)

    def check_page(self, path: Path) -> PageCheck:
        """Open ``path`` in a new tab, wait for the load event and the images, read the rendered DOM."""
        url = Path(path).resolve().as_uri()
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        try:
            for domain in ("Runtime", "Log", "Page"):
                self.send(f"{domain}.enable", session=session)
            self.events = [e for e in self.events if e.get("sessionId") != session]  # about:blank's own events
            nav = self.send("Page.navigate", {"url": url}, session=session)
            if nav.get("errorText"):
                raise BrowserError(f"{url}: navigation failed: {nav['errorText']}")
            self.wait_event("Page.loadEventFired", session)
            res = self.send("Runtime.evaluate", {"expression": _DOM_QUERY, "awaitPromise": True,
                                                 "returnByValue": True}, session=session)
            if "exceptionDetails" in res:
                raise BrowserError(f"{url}: DOM query failed: {res['exceptionDetails']}")
            self.drain(0.3)
            dom = res["result"]["value"]
            check = PageCheck(url, dom["title"], dom["sections"], dom["images"], dom["figures"])
            for e in self.events:
                if e.get("sessionId") == session:
                    _classify(e, check)
            return check
        finally:
            self.events = []
            try:
                self.send("Target.closeTarget", {"targetId": target}, timeout_s=5)
            except BrowserError:
                pass  # the original failure matters, not the tab that stays open

    def close(self) -> None:
        try:
            if getattr(self, "ws", None) is not None:
                try:
                    self.send("Browser.close", timeout_s=5)
                except Exception:
                    pass
                self.ws.close()
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)  # the process group this object started
            self.proc.wait(timeout=10)
        finally:
            self._log.close()


def _classify(event: dict, check: PageCheck) -> None:
    method, p = event.get("method"), event.get("params", {})
    if method == "Runtime.consoleAPICalled":
        text = " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", []))
        check.messages.append(f"console.{p.get('type')}: {text}")
        if p.get("type") in ("error", "assert"):
            check.errors.append(f"console.{p.get('type')}: {text}")
    elif method == "Runtime.exceptionThrown":
        d = p.get("exceptionDetails", {})
        text = (d.get("exception") or {}).get("description") or d.get("text", "")
        check.messages.append(f"exception: {text}")
        check.errors.append(f"uncaught exception: {text}")
    elif method == "Log.entryAdded":
        e = p.get("entry", {})
        text = f"{e.get('source')}: {e.get('text')} {e.get('url', '')}".strip()
        check.messages.append(f"log.{e.get('level')}: {text}")
        if e.get("level") == "error":
            check.errors.append(f"log error: {text}")


# ----------------------------------------------------------------------------- the checker

class _Source(HTMLParser):
    """Section ids, their <h2> texts and the number of <img> in the file itself."""

    def __init__(self):
        super().__init__()
        self.ids: list[str] = []
        self.headings: dict[str, str] = {}
        self.n_img = 0
        self._section: str | None = None
        self._in_h2 = False

    def handle_starttag(self, tag, attrs):
        if tag == "section":
            self._section = dict(attrs).get("id", "")
            self.ids.append(self._section)
            self.headings[self._section] = ""
        elif tag == "h2" and self._section is not None:
            self._in_h2 = True
        elif tag == "img":
            self.n_img += 1

    def handle_endtag(self, tag):
        if tag == "h2":
            self._in_h2 = False
        elif tag == "section":
            self._section = None

    def handle_data(self, data):
        if self._in_h2 and self._section is not None:
            self.headings[self._section] += data


def page_problems(check: PageCheck, html_path: Path, expected_ids: Sequence[str]) -> list[str]:
    """Everything wrong with a page as the browser rendered it (empty: the page is fine)."""
    src = _Source()
    src.feed(Path(html_path).read_text(encoding="utf-8"))
    problems = list(check.errors)
    rendered = {s["id"]: s for s in check.sections}
    for sid in expected_ids:
        s = rendered.get(sid)
        if s is None:
            problems.append(f"section #{sid}: not in the rendered DOM")
            continue
        want = " ".join(src.headings.get(sid, "").split())
        if not s["heading"] or " ".join(s["heading"].split()) != want:
            problems.append(f"section #{sid}: rendered heading {s['heading']!r}, the file has {want!r}")
        if not s["visible"]:
            problems.append(f"section #{sid}: heading not rendered (no layout box or hidden)")
    extra = [s["id"] for s in check.sections if s["id"] not in expected_ids]
    if extra:
        problems.append(f"unexpected sections {extra}")
    if len(check.images) != src.n_img:
        problems.append(f"{len(check.images)} images in the DOM, {src.n_img} <img> in the file")
    for i, im in enumerate(check.images):
        if not im["complete"] or im["naturalWidth"] <= 0:
            problems.append(f"image {i} ({im['alt']!r}): not loaded (naturalWidth {im['naturalWidth']})")
        elif not im["visible"]:
            problems.append(f"image {i} ({im['alt']!r}): not rendered")
    return problems


# ----------------------------------------------------------------------------- fixtures

@pytest.fixture(scope="session")
def chromium_exe() -> str:
    try:
        import websocket  # noqa: F401
    except ImportError:
        msg = "websocket-client is not installed (pip install -e '.[test]')"
        if in_ci():
            pytest.fail(msg)
        pytest.skip(msg)
    exe = find_browser()
    if exe:
        return exe
    if not in_ci():
        pytest.skip(f"no headless browser on PATH ({', '.join(BROWSER_NAMES)}; or set ROBIDENT_CHROMIUM): "
                    f"install the Debian package `chromium` (CI=true installs it itself when root)")
    ok, log = apt_install_browser()
    exe = find_browser()
    if not exe:
        pytest.fail(f"CI: no Chromium on PATH and installing it failed (ok={ok}):\n{log[-6000:]}")
    return exe


@pytest.fixture(scope="session")
def browser(chromium_exe, tmp_path_factory):
    b = Chromium(chromium_exe, tmp_path_factory.mktemp("chromium"))
    print(f"browser: {chromium_exe} ({b.version})")
    yield b
    b.close()


def assert_page_ok(browser: Chromium, path: Path, expected_ids: Sequence[str]) -> PageCheck:
    check = browser.check_page(path)
    problems = page_problems(check, path, expected_ids)
    assert not problems, f"{path} in {browser.version}:\n" + "\n".join(problems) + \
        "\nall messages:\n" + "\n".join(check.messages)
    return check


# ----------------------------------------------------------------------------- tests

def test_default_run_report_renders_without_errors(browser, identify_run):
    """The report of the default identification run: no console error, every section, every figure."""
    _, out, _ = identify_run
    check = assert_page_ok(browser, out / hr.REPORT, hr.IDENTIFY_SECTIONS)
    assert [s["id"] for s in check.sections] == list(hr.IDENTIFY_SECTIONS)
    assert len(check.figures) == 5 and min(f["width"] for f in check.figures) > 100
    assert all(f["visible"] for f in check.figures)
    assert check.title.startswith("robident-twin identification: iiwa14")


def test_montecarlo_and_sweep_reports_render_without_errors(browser, tmp_path):
    """A Monte-Carlo job report and a sweep aggregate (synthetic jobs as in test_html_report.py)."""
    from test_html_report import _synthetic_job

    from robident_twin.validation.sweeps import aggregate

    _synthetic_job(tmp_path / "job", 1.0, 1, biased="MX2")
    check = assert_page_ok(browser, hr.build_report(tmp_path / "job"), hr.MONTECARLO_SECTIONS)
    assert len(check.figures) == 5 and all(f["visible"] for f in check.figures)

    _synthetic_job(tmp_path / "sweep" / "0", 1.0, 2)
    _synthetic_job(tmp_path / "sweep" / "1", 2.0, 3)
    aggregate(tmp_path / "sweep", plots=True)
    check = assert_page_ok(browser, hr.build_report(tmp_path / "sweep"), [*hr.AGGREGATE_SECTIONS, "job-0", "job-1"])
    assert len(check.figures) == 3 + 2 * 3 and all(f["visible"] for f in check.figures)


def test_checker_flags_a_broken_page(browser, tmp_path):
    """Console error, uncaught exception, broken image, hidden and missing sections: all reported."""
    page = tmp_path / "broken.html"
    page.write_text(
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>broken</title></head><body>'
        '<section id="overview"><h2>Run overview</h2>'
        '<img alt="truncated png" src="data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAA"></section>'
        '<section id="excitation" style="display:none"><h2>Excitation</h2></section>'
        '<script>console.error("deliberate console error"); null.boom();</script>'
        "</body></html>\n", encoding="utf-8")
    check = browser.check_page(page)
    problems = page_problems(check, page, ("overview", "excitation", "validation"))
    text = "\n".join(problems)
    assert "console.error: deliberate console error" in text, text
    assert "uncaught exception: TypeError" in text, text
    assert "image 0 ('truncated png'): not loaded (naturalWidth 0)" in text, text
    assert "section #excitation: heading not rendered" in text, text
    assert "section #validation: not in the rendered DOM" in text, text
    # and a correct page in the same browser has no problem at all (the checker is not just noisy)
    ok = tmp_path / "ok.html"
    ok.write_text(page.read_text().replace('style="display:none"', "").replace(
        "<script>console.error(\"deliberate console error\"); null.boom();</script>",
        '<section id="validation"><h2>Validation</h2></section>').replace(
        '<img alt="truncated png" src="data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAA">', ""), encoding="utf-8")
    assert page_problems(browser.check_page(ok), ok, ("overview", "excitation", "validation")) == []
