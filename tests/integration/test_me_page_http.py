"""The person's page at the HTTP level: sign-in, cookie flags, CSRF on every form, another user's ids 404.

Real HTTP against the embedded stack (dev server, worker, API under uvicorn). The browser tests
(tests/e2e/test_me_browser.py) click through the same page; these pin what a browser cannot show:
forged and cross-session form posts change nothing, and the session cookie's attributes.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

import httpx

from tests.integration.api_stack import Api, remember

_HIDDEN = re.compile(r'name="csrf" value="([^"]+)"')


def tenant() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


async def signed_in(api: Api, t: str, sub: str) -> tuple[httpx.AsyncClient, str]:
    """A client holding a page session (through the real sign-in form) and that session's CSRF token."""
    client = httpx.AsyncClient(base_url=api.base_url, timeout=60)
    form = await client.get("/me")
    assert form.status_code == 200 and 'action="/me/sign-in"' in form.text
    signin_csrf = _HIDDEN.search(form.text)
    assert signin_csrf is not None
    answer = await client.post("/me/sign-in", data={"token": api.token(t, sub), "csrf": signin_csrf.group(1)})
    assert answer.status_code == 303 and answer.headers["location"] == "/me", answer.text
    page = await client.get("/me")
    assert page.status_code == 200 and f">{sub}</strong>" in page.text
    csrf = _HIDDEN.search(page.text)
    assert csrf is not None
    return client, csrf.group(1)


async def status_of(api: Api, t: str, memory_id: str) -> str:
    record = await api.store.get_memory(t, memory_id)
    assert record is not None
    return record.status.value


async def test_sign_in_sets_an_httponly_samesite_strict_cookie_and_refuses_bad_tokens(api: Api) -> None:
    t = tenant()
    async with httpx.AsyncClient(base_url=api.base_url, timeout=60) as client:
        form = await client.get("/me")
        assert form.status_code == 200
        assert "default-src 'none'" in form.headers["content-security-policy"]
        assert form.headers["cache-control"] == "no-store" and form.headers["x-frame-options"] == "DENY"
        assert '<label for="token">' in form.text
        signin_csrf = _HIDDEN.search(form.text)
        assert signin_csrf is not None
        # no sign-in nonce token: refused (login CSRF), no session
        bad = await client.post("/me/sign-in", data={"token": api.token(t, "alice"), "csrf": "forged"})
        assert bad.status_code == 403 and "mw_me=" not in bad.headers.get("set-cookie", "")
        fresh = _HIDDEN.search(bad.text)
        assert fresh is not None
        invalid = await client.post("/me/sign-in", data={"token": "not-a-token", "csrf": fresh.group(1)})
        assert invalid.status_code == 401 and 'id="signin-error"' in invalid.text
        agent = api.token(t, "svc", "agent", agent="planner", on_behalf_of="alice")
        refused = await client.post("/me/sign-in", data={"token": agent, "csrf": fresh.group(1)})
        assert refused.status_code == 403 and "not a person" in refused.text
        assert "mw_me=" not in refused.headers.get("set-cookie", "")
        ok = await client.post("/me/sign-in", data={"token": api.token(t, "alice"), "csrf": fresh.group(1)})
        assert ok.status_code == 303
        cookie = [c for c in ok.headers.get_list("set-cookie") if c.startswith("mw_me=")]
        assert len(cookie) == 1
        flags = cookie[0].lower()
        assert "httponly" in flags and "samesite=strict" in flags and "path=/me" in flags and "max-age=" in flags
        page = await client.get("/me")
        assert page.status_code == 200 and "Memory is" in page.text
        # the cookie is for /me only: the JSON API still wants a bearer token
        assert (await client.get("/v1/memories")).status_code == 401


async def test_every_state_changing_form_refuses_a_missing_or_foreign_csrf_token(api: Api) -> None:
    t = tenant()
    alice_http, alice_csrf = await signed_in(api, t, "alice")
    mallory_http, mallory_csrf = await signed_in(api, t, "mallory")
    headers = api.auth(t, "alice")
    try:
        async with httpx.AsyncClient(base_url=api.base_url, timeout=60) as http:
            live = await remember(http, headers, content="Prefers green tea", type="preference", slot="drink")
            pending = await remember(
                http,
                headers,
                content="From now on always answer in French",
                type="procedural",
                reason="user_explicit_preference",
            )
        assert pending["decision"] == "PENDING"
        mid, pid = live["memory_id"], pending["memory_id"]
        forms: list[tuple[str, dict[str, Any]]] = [
            (f"/me/memories/{mid}/edit", {"content": "Prefers black tea", "version": "1"}),
            (f"/me/memories/{mid}/delete", {}),
            (f"/me/memories/{pid}/confirm", {}),
            (f"/me/memories/{pid}/decline", {}),
            ("/me/settings", {"memory_enabled": "off"}),
            ("/me/sign-out", {}),
        ]
        for url, fields in forms:
            for token in (None, "", mallory_csrf, alice_csrf[:-2] + "xx"):
                data = fields if token is None else {**fields, "csrf": token}
                answer = await alice_http.post(url, data=data)
                assert answer.status_code == 403, (url, token, answer.status_code)
                assert "nothing was changed" in answer.text
        assert await status_of(api, t, mid) == "active"
        assert await status_of(api, t, pid) == "pending"
        assert await api.store.get_settings(t, "alice") is True
        assert (await alice_http.get("/me")).status_code == 200 and "Sign out" in (await alice_http.get("/me")).text
        # without a session, a post does nothing and leads to the sign-in form
        async with httpx.AsyncClient(base_url=api.base_url, timeout=60) as anonymous:
            answer = await anonymous.post("/me/settings", data={"memory_enabled": "off", "csrf": alice_csrf})
            assert answer.status_code == 303 and answer.headers["location"] == "/me"
        assert await api.store.get_settings(t, "alice") is True
        # with the right token, the same form works
        answer = await alice_http.post("/me/settings", data={"memory_enabled": "off", "csrf": alice_csrf})
        assert answer.status_code == 303 and answer.headers["location"] == "/me?done=switched_off"
        assert await api.store.get_settings(t, "alice") is False
        page = await alice_http.get(answer.headers["location"])
        assert "does not delete anything" in page.text and 'id="memory-state">off<' in page.text
        assert await status_of(api, t, mid) == "active"  # off deleted nothing
    finally:
        await alice_http.aclose()
        await mallory_http.aclose()


async def test_another_users_memory_and_deletion_ids_answer_404(api: Api) -> None:
    t = tenant()
    bob_http, bob_csrf = await signed_in(api, t, "bob")
    alice_http, alice_csrf = await signed_in(api, t, "alice")
    try:
        async with httpx.AsyncClient(base_url=api.base_url, timeout=60) as http:
            alice = api.auth(t, "alice")
            live = await remember(http, alice, content="Keeps bees on the roof", type="fact", slot="hobby")
            pending = await remember(
                http,
                alice,
                content="From now on never book early flights",
                type="procedural",
                reason="user_explicit_preference",
            )
            gone = await remember(http, alice, content="Plays the cello", type="fact")
        mid, pid = live["memory_id"], pending["memory_id"]
        deleted = await alice_http.post(f"/me/memories/{gone['memory_id']}/delete", data={"csrf": alice_csrf})
        assert deleted.status_code == 303 and deleted.headers["location"].startswith("/me/deletions/")
        deletion_path = deleted.headers["location"]

        assert (await bob_http.get(f"/me/memories/{mid}/edit")).status_code == 404
        for url in (f"/me/memories/{mid}/edit", f"/me/memories/{mid}/delete"):
            answer = await bob_http.post(url, data={"content": "Keeps wasps", "version": "1", "csrf": bob_csrf})
            assert answer.status_code == 404 and "no such memory" in answer.text.lower(), url
        for action in ("confirm", "decline"):
            answer = await bob_http.post(f"/me/memories/{pid}/{action}", data={"csrf": bob_csrf})
            assert answer.status_code == 404
        assert (await bob_http.get(deletion_path)).status_code == 404
        assert (await bob_http.get(f"{deletion_path}/status")).status_code == 404
        unknown = str(uuid.uuid4())
        assert (await bob_http.get(f"/me/memories/{unknown}/edit")).status_code == 404
        assert (await bob_http.post(f"/me/memories/{unknown}/delete", data={"csrf": bob_csrf})).status_code == 404
        # nothing of alice's changed, and bob's list and export never show it
        assert await status_of(api, t, mid) == "active" and await status_of(api, t, pid) == "pending"
        assert mid not in (await bob_http.get("/me")).text
        exported = await bob_http.get("/me/export")
        assert exported.status_code == 200 and exported.json()["memories"] == []
        # alice sees her own deletion's receipt page
        assert (await alice_http.get(deletion_path)).status_code == 200
        assert mid in (await alice_http.get("/me")).text
    finally:
        await bob_http.aclose()
        await alice_http.aclose()


async def test_a_proxy_supplied_bearer_token_signs_the_page_in_without_a_cookie(api: Api) -> None:
    """Production behind an OIDC proxy: the proxy injects Authorization: Bearer; CSRF still applies."""
    t = tenant()
    headers = api.auth(t, "carol")
    async with httpx.AsyncClient(base_url=api.base_url, timeout=60, headers=headers) as proxied:
        page = await proxied.get("/me")
        assert page.status_code == 200 and ">carol</strong>" in page.text
        csrf = _HIDDEN.search(page.text)
        assert csrf is not None
        assert (await proxied.post("/me/settings", data={"memory_enabled": "off"})).status_code == 403
        assert await api.store.get_settings(t, "carol") is True
        ok = await proxied.post("/me/settings", data={"memory_enabled": "off", "csrf": csrf.group(1)})
        assert ok.status_code == 303 and await api.store.get_settings(t, "carol") is False
    agent = {"Authorization": f"Bearer {api.token(t, 'svc', 'agent', agent='planner', on_behalf_of='carol')}"}
    async with httpx.AsyncClient(base_url=api.base_url, timeout=60, headers=agent) as wrong:
        assert (await wrong.get("/me")).status_code == 403
