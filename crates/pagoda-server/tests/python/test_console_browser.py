"""The operator console in a real browser (headless Debian Chromium, driven by Playwright).

usage: test_console_browser.py BASE_URL ADMIN_KEY ACME_COST OUT_DIR

Signs in with the admin key, checks the engine charts update, creates a key (its secret
shown once, working against the API) and revokes it (then refused), reads tenant acme's
spend on the usage page (ACME_COST, as /v1/usage reports it), the guardrail page with its
red-team report, and the reports page (a bench report with its plots loaded as images, a
plan; a plot opened on its own runs none of its script); takes a screenshot of every page at
1280x800 and 390x844 into OUT_DIR and checks each is not blank; fails on any console error
or any request to another origin.
"""
import json
import os
import struct
import sys
import urllib.error
import urllib.request
import zlib

from playwright.sync_api import sync_playwright

BASE, ADMIN_KEY, ACME_COST, OUT_DIR = sys.argv[1:5]
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
VIEWPORTS = [(1280, 800), (390, 844)]
PAGES = ["engine", "tenants", "usage", "guard", "reports", "report-bench"]


def png_is_blank(data: bytes) -> bool:
    """True when the decoded pixels hold (nearly) one value: a blank screenshot."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat = 8, b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        if kind == b"IDAT":
            idat += data[pos + 8 : pos + 8 + length]
        pos += 12 + length
    pixels = zlib.decompress(idat)
    return len(set(pixels[:: max(1, len(pixels) // 200_000)])) < 16


def api_status(key: str) -> int:
    body = json.dumps(
        {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "temperature": 0}
    ).encode()
    request = urllib.request.Request(
        BASE + "/v1/chat/completions",
        data=body,
        headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status
    except urllib.error.HTTPError as e:
        return e.code


def shoot(page, name: str, size):
    path = os.path.join(OUT_DIR, f"console-{name}-{size[0]}x{size[1]}.png")
    data = page.screenshot(path=path, full_page=True)
    assert not png_is_blank(data), f"{path} is blank"


def run(browser, size, first: bool):
    context = browser.new_context(viewport={"width": size[0], "height": size[1]})
    page = context.new_page()
    errors, foreign = [], []
    page.on("request", lambda r: r.url.startswith((BASE, "data:", "about:")) or foreign.append(r.url))

    # Signed out, every page is the sign-in form with 401 and nothing of the deployment.
    response = page.goto(BASE + "/ui/tenants")
    assert response.status == 401, response.status
    assert "acme" not in page.content()
    page.fill("input[name=key]", "pgd_0000000000000000_" + "0" * 64)
    page.click("button[type=submit]")
    assert page.is_visible("#sign-in-error"), "a wrong key must be refused"

    page.on("console", lambda m: m.type == "error" and errors.append(m.text))
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.fill("input[name=key]", ADMIN_KEY)
    page.click("button[type=submit]")
    page.wait_for_url(BASE + "/ui/engine")

    # The charts redraw as samples arrive (every 2 s).
    chart = "#chart-requests"
    page.wait_for_function(f"Number(document.querySelector('{chart}').dataset.samples || 0) >= 1", timeout=30_000)
    before = int(page.get_attribute(chart, "data-samples"))
    page.wait_for_function(
        f"Number(document.querySelector('{chart}').dataset.samples) > {before}", timeout=30_000
    )
    assert page.locator(f"{chart} polyline").count() == 2
    shoot(page, "engine", size)

    page.goto(BASE + "/ui/tenants")
    assert "acme" in page.inner_text("#tenants")
    if first:
        page.fill("#create-key input[name=tenant]", "newteam")
        page.fill("#create-key input[name=name]", "from the browser")
        page.fill("#create-key input[name=expires_days]", "30")
        page.click("#create-key button[type=submit]")
        secret = page.inner_text("#new-key-secret").strip()
        assert secret.startswith("pgd_"), secret
        assert api_status(secret) == 200
        page.goto(BASE + "/ui/tenants")
        assert secret not in page.content(), "the secret must be shown only once"
        key_id = secret.split("_")[1]
        row = page.locator("#keys tr", has_text=key_id)
        assert "active" in row.inner_text()
        page.click(f"button[data-revoke='{key_id}']")
        page.wait_for_url(BASE + "/ui/tenants")
        assert "revoked" in page.locator("#keys tr", has_text=key_id).inner_text()
        assert api_status(secret) == 401
        actions = page.inner_text("#admin-actions")
        assert "key.create" in actions and "key.revoke" in actions, actions
    shoot(page, "tenants", size)

    page.goto(BASE + "/ui/usage?days=1&by=hour")
    usage = page.inner_text("#usage")
    acme_rows = [line for line in usage.splitlines() if "acme" in line]
    assert acme_rows and any(ACME_COST in line for line in acme_rows), (ACME_COST, usage)
    assert page.locator("#usage-chart rect").count() >= 1
    shoot(page, "usage", size)

    page.goto(BASE + "/ui/guard")
    assert "verified" in page.inner_text("#chain")
    assert "block" in page.inner_text("#guard-decisions")
    assert "CARD" in page.inner_text("#guard-blocks")
    assert "1.00" in page.inner_text("#redteam-packs")
    shoot(page, "guard", size)

    page.goto(BASE + "/ui/reports")
    reports = page.inner_text("#reports")
    for kind in ["bench serve", "bench profile", "plan", "red team", "unreadable"]:
        assert kind in reports, (kind, reports)
    shoot(page, "reports", size)
    page.click("#reports a[href='/ui/reports/bench.json']")
    page.wait_for_url(BASE + "/ui/reports/bench.json")
    assert "concurrency 2" in page.inner_text("#bench-throughput")
    assert page.locator(".plots img").count() == 2
    page.wait_for_function(
        "Array.from(document.querySelectorAll('.plots img')).every(i => i.complete && i.naturalWidth > 0)",
        timeout=10_000,
    )
    shoot(page, "report-bench", size)
    page.goto(BASE + "/ui/reports/plan.json")
    assert "colocated" in page.inner_text("#plan-pools")

    # A plot opened on its own: its script must not run. The browser logs the block itself;
    # that message is the CSP working, not a console fault.
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    before = len(errors)
    page.goto(BASE + "/ui/reports/svg/plain.svg")
    page.wait_for_timeout(500)
    assert not dialogs, dialogs
    blocked = ("sandbox", "Content Security Policy", "Blocked script")
    assert all(any(b in e for b in blocked) for e in errors[before:]), errors[before:]
    del errors[before:]

    assert not errors, errors
    assert not foreign, foreign
    context.close()


def main():
    os.makedirs(OUT_DIR, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        for i, size in enumerate(VIEWPORTS):
            run(browser, size, first=i == 0)
        browser.close()
    print("console checked at", ", ".join(f"{w}x{h}" for w, h in VIEWPORTS))


if __name__ == "__main__":
    main()
