"""The person's page in a real browser: Debian's Chromium, headless, driven by Playwright's Python package.

Against the real stack (Temporal dev server, worker over SQLite + Qdrant Edge, the API under uvicorn),
as the other integration tests run it. Playwright is pointed at /usr/bin/chromium through
`executable_path` (`make test` installs Debian's package when it is missing); no browser is downloaded.
Each test signs in through the page's own form, as a person would, and works by labels and roles.
Screenshots are kept under test-artifacts/me/ (gitignored) as the run's artefacts.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.async_api import Browser, Page, async_playwright, expect

from tests.integration.api_stack import Api, embedded_api, remember

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "me"
LAUNCH_ARGS = [
    "--no-sandbox",  # CI runs as root
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",  # this machine's network is closed: no calls home
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")
async def api(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Api]:
    async with embedded_api(tmp_path_factory.mktemp("me-browser")) as stack:
        yield stack


def _prepare() -> None:
    assert CHROMIUM.exists(), "Debian's chromium is required (apt-get install -y chromium; make test does it)"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)


@pytest.fixture(scope="module")
async def browser() -> AsyncIterator[Browser]:
    _prepare()
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=LAUNCH_ARGS)
        try:
            yield launched
        finally:
            await launched.close()


@pytest.fixture
async def page(browser: Browser, api: Api) -> AsyncIterator[Page]:
    context = await browser.new_context(base_url=api.base_url, accept_downloads=True)
    opened = await context.new_page()
    opened.set_default_timeout(30_000)
    try:
        yield opened
    finally:
        await context.close()


@pytest.fixture
async def http(api: Api) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=api.base_url, timeout=60) as client:
        yield client


def tenant() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


async def shot(page: Page, name: str) -> None:
    await page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


async def sign_in(page: Page, api: Api, t: str, sub: str) -> None:
    await page.goto("/me")
    await expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    await page.get_by_label("Your access token").fill(api.token(t, sub))
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.get_by_role("heading", name="Your memories")).to_be_visible()
    await expect(page.locator("#who")).to_have_text(sub)


def article(page: Page, memory_id: str) -> Any:
    return page.locator(f"#m-{memory_id}")


async def test_sign_in_by_pasting_a_token_and_see_every_memory_live_and_past(
    page: Page, api: Api, http: httpx.AsyncClient
) -> None:
    t = tenant()
    agent = api.auth(t, "planner-svc", "agent", agent="planner", on_behalf_of="alice")
    seat = await remember(http, agent, content="Alice prefers aisle seats", type="preference", slot="travel.seat")
    city = await remember(
        http, agent, content="Alice lives in Ghent", type="fact", slot="user.city", reason="user_stated_fact"
    )
    moved = (
        await http.patch(
            f"/v1/memories/{city['memory_id']}", headers=api.auth(t, "alice"), json={"content": "Alice lives in Leuven"}
        )
    ).json()
    assert moved["decision"] == "UPDATE"
    await remember(http, api.auth(t, "bob"), content="Bob lives in Namur", type="fact")

    await page.goto("/me")
    await shot(page, "01-sign-in")
    await sign_in(page, api, t, "alice")
    await shot(page, "02-list")
    live = article(page, seat["memory_id"])
    await expect(live).to_contain_text("Alice prefers aisle seats")
    await expect(live).to_contain_text("Preference")
    await expect(live).to_contain_text("you said so")  # source
    await expect(live).to_contain_text("user_stated_fact")  # why
    await expect(live).to_contain_text("planner")  # written by
    await expect(live).to_have_attribute("data-status", "active")
    await expect(article(page, moved["memory_id"])).to_contain_text("Alice lives in Leuven")
    past = article(page, city["memory_id"])
    await expect(past).to_have_attribute("data-status", "superseded")
    await expect(past).to_contain_text("Replaced by a newer version")
    await expect(page.get_by_text("Bob lives in Namur")).to_have_count(0)
    # the "in use" filter leaves the past version out
    await page.get_by_role("link", name="In use").click()
    await expect(article(page, city["memory_id"])).to_have_count(0)
    await expect(article(page, moved["memory_id"])).to_be_visible()


async def test_edit_makes_a_new_version_that_supersedes_the_old(page: Page, api: Api, http: httpx.AsyncClient) -> None:
    t = tenant()
    first = await remember(
        http, api.auth(t, "alice"), content="Takes the 8:10 train to work", type="fact", slot="commute"
    )
    await sign_in(page, api, t, "alice")
    await article(page, first["memory_id"]).get_by_role("link", name="Edit this memory").click()
    await expect(page.get_by_role("heading", name="Correct a memory")).to_be_visible()
    field = page.get_by_label("What it should say")
    await expect(field).to_have_value("Takes the 8:10 train to work")
    await field.fill("Takes the 7:40 train to work")
    await shot(page, "03-edit")
    await page.get_by_role("button", name="Save correction").click()
    await expect(page.locator("#notice")).to_contain_text("Corrected")
    await shot(page, "04-edited")
    old = article(page, first["memory_id"])
    await expect(old).to_have_attribute("data-status", "superseded")
    new = page.locator("article[data-status=active]", has_text="Takes the 7:40 train to work")
    await expect(new).to_have_count(1)
    new_id = (await new.get_attribute("id") or "")[2:]
    stored = (await http.get(f"/v1/memories/{new_id}", headers=api.auth(t, "alice"))).json()
    assert stored["supersedes"] == first["memory_id"] and [h["id"] for h in stored["history"]] == [first["memory_id"]]


async def test_undo_the_last_change_from_a_memorys_versions(page: Page, api: Api, http: httpx.AsyncClient) -> None:
    t = tenant()
    alice = api.auth(t, "alice")
    first = await remember(http, alice, content="Walks the dog at seven", type="fact", slot="dog.walk")
    fixed = (
        await http.patch(f"/v1/memories/{first['memory_id']}", headers=alice, json={"content": "Walks the dog at nine"})
    ).json()
    assert fixed["decision"] == "UPDATE"
    await sign_in(page, api, t, "alice")
    await article(page, fixed["memory_id"]).get_by_role("link", name="See every version of this memory").click()
    await expect(page.get_by_role("heading", name="Versions of a memory")).to_be_visible()
    earlier = page.get_by_role("region", name="Earlier versions")
    await expect(earlier.locator(f"#m-{first['memory_id']}")).to_contain_text("Walks the dog at seven")
    await shot(page, "05a-versions")
    await page.get_by_role("button", name="Undo the last change: bring back the earlier value").click()
    await expect(page.locator("#notice")).to_contain_text("Undone")
    await shot(page, "05b-reverted")
    await expect(article(page, fixed["memory_id"])).to_have_attribute("data-status", "superseded")
    restored = page.locator("article[data-status=active]", has_text="Walks the dog at seven")
    await expect(restored).to_have_count(1)
    restored_id = (await restored.get_attribute("id") or "")[2:]
    stored = (await http.get(f"/v1/memories/{restored_id}", headers=alice)).json()
    assert [h["id"] for h in stored["history"]] == [fixed["memory_id"], first["memory_id"]]
    # The page's revert is the API's: asked again, the API answers the same revert.
    again = await http.post(f"/v1/memories/{fixed['memory_id']}/revert", headers=alice)
    assert again.status_code == 200 and again.json()["memory_id"] == restored_id


async def test_confirm_a_pending_write(page: Page, api: Api, http: httpx.AsyncClient) -> None:
    t = tenant()
    agent = api.auth(t, "planner-svc", "agent", agent="planner", on_behalf_of="alice")
    staged = await remember(
        http,
        agent,
        content="From now on always book hotels with a gym",
        type="procedural",
        reason="user_explicit_preference",
    )
    assert staged["decision"] == "PENDING"
    await sign_in(page, api, t, "alice")
    pending = page.locator("#pending")
    await expect(pending.get_by_role("heading", level=2)).to_contain_text("Waiting for your confirmation (1)")
    await expect(article(page, staged["memory_id"])).to_contain_text("always book hotels with a gym")
    await shot(page, "05-pending")
    await article(page, staged["memory_id"]).get_by_role("button", name="Confirm: keep this memory").click()
    await expect(page.locator("#notice")).to_contain_text("Confirmed")
    await expect(page.locator("#pending")).to_have_count(0)
    await expect(article(page, staged["memory_id"])).to_have_attribute("data-status", "active")
    await shot(page, "06-confirmed")
    record = await api.store.get_memory(t, staged["memory_id"])
    assert record is not None and record.status.value == "active"


async def test_delete_shows_the_receipt_progress_until_verified(page: Page, api: Api, http: httpx.AsyncClient) -> None:
    t = tenant()
    alice = api.auth(t, "alice")
    first = await remember(
        http, alice, content="Has a dentist appointment every March", type="fact", slot="health.dentist"
    )
    fixed = (
        await http.patch(
            f"/v1/memories/{first['memory_id']}",
            headers=alice,
            json={"content": "Has a dentist appointment every April"},
        )
    ).json()
    await sign_in(page, api, t, "alice")
    target = article(page, fixed["memory_id"])
    await target.get_by_text("Delete…").click()
    await expect(target.get_by_text("It cannot be undone")).to_be_visible()
    polled: list[str] = []
    page.on("request", lambda request: polled.append(request.url) if request.url.endswith("/status") else None)
    await target.get_by_role("button", name="Delete for good").click()
    await expect(page.get_by_role("heading", name="Deleting a memory")).to_be_visible()
    first_status = await page.locator("#deletion-status").text_content()
    await shot(page, "07-deleting")
    # the page's script polls the status fragment; no reload by the test
    await expect(page.locator("#deletion-status")).to_have_text("verified", timeout=90_000)
    if first_status != "verified":
        assert polled, "the progress reached verified without the page polling its status fragment"
    await expect(page.locator("#receipt-hash")).not_to_be_empty()
    await expect(page.locator("#receipt tr[data-sink]")).not_to_have_count(0)
    await shot(page, "08-verified")
    for memory_id in (first["memory_id"], fixed["memory_id"]):  # the whole slot chain
        record = await api.store.get_memory(t, memory_id)
        assert record is not None and record.status.value == "purged" and record.content is None
    await page.get_by_role("link", name="Back to your memories").click()
    await expect(article(page, fixed["memory_id"])).to_contain_text("its text has been erased")
    await expect(page.get_by_text("every April")).to_have_count(0)


async def test_switch_memory_off_by_keyboard_deletes_nothing(page: Page, api: Api, http: httpx.AsyncClient) -> None:
    t = tenant()
    agent = api.auth(t, "planner-svc", "agent", agent="planner", on_behalf_of="alice")
    kept = await remember(http, agent, content="Alice reads crime novels", type="preference", slot="books")
    await sign_in(page, api, t, "alice")
    await expect(page.locator("#switch")).to_contain_text("Switching memory off does not delete anything")
    # keyboard only: Tab from the top of the page to the switch, then Enter
    await page.locator("body").focus()
    for _ in range(40):
        await page.keyboard.press("Tab")
        if await page.evaluate("document.activeElement && document.activeElement.id") == "switch-button":
            break
    else:
        raise AssertionError("the memory switch cannot be reached with the keyboard")
    await page.keyboard.press("Enter")
    await expect(page.locator("#memory-state")).to_have_text("off")
    await expect(page.locator("#notice")).to_contain_text("Nothing was deleted")
    await shot(page, "09-switched-off")
    await expect(article(page, kept["memory_id"])).to_contain_text("Alice reads crime novels")
    assert await api.store.get_settings(t, "alice") is False
    refused = await remember(http, agent, content="Alice likes jazz", type="preference")
    assert refused["decision"] == "REJECT" and refused["reason"] == "memory_disabled"
    assert (await http.get("/v1/memories", headers=agent)).json()["items"] == []  # agents read nothing
    record = await api.store.get_memory(t, kept["memory_id"])
    assert record is not None and record.status.value == "active"  # kept
    await page.get_by_role("button", name="Switch memory on").click()
    await expect(page.locator("#memory-state")).to_have_text("on")
    assert await api.store.get_settings(t, "alice") is True


async def test_export_downloads_everything_as_json(page: Page, api: Api, http: httpx.AsyncClient) -> None:
    t = tenant()
    alice = api.auth(t, "alice")
    first = await remember(http, alice, content="Speaks Dutch and Spanish", type="fact", slot="languages")
    fixed = (
        await http.patch(
            f"/v1/memories/{first['memory_id']}", headers=alice, json={"content": "Speaks Dutch, Spanish and Basque"}
        )
    ).json()
    await sign_in(page, api, t, "alice")
    async with page.expect_download() as waiting:
        await page.get_by_role("link", name="Export everything (JSON)").click()
    download = await waiting.value
    assert download.suggested_filename == "memwarden-export.json"
    saved = ARTIFACTS / "export.json"
    await download.save_as(saved)
    document = json.loads(saved.read_text())
    assert document["owner_id"] == "alice" and document["tenant"] == t
    statuses = {m["id"]: m["status"] for m in document["memories"]}
    assert statuses == {first["memory_id"]: "superseded", fixed["memory_id"]: "active"}


async def test_every_control_has_a_label_and_no_asset_comes_from_elsewhere(
    page: Page, api: Api, http: httpx.AsyncClient
) -> None:
    t = tenant()
    await remember(http, api.auth(t, "alice"), content="Walks to work", type="fact")
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    await sign_in(page, api, t, "alice")
    unlabelled = await page.evaluate(
        """() => [...document.querySelectorAll('input:not([type=hidden]), textarea, select, button, a[href]')]
              .filter(el => !(el.labels && el.labels.length) && !el.getAttribute('aria-label')
                            && !(el.textContent || '').trim())
              .map(el => el.outerHTML)"""
    )
    assert unlabelled == []
    assert requested and all(url.startswith(api.base_url) for url in requested), requested
    assert await page.evaluate("document.querySelectorAll('script').length") == 1
