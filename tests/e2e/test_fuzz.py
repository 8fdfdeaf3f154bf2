"""Schemathesis over the OpenAPI document, against the real stack (issue 22 part 9).

`memwarden up` runs as a subprocess (Temporal dev server, worker, API under uvicorn) in a fresh data
dir; the document is read from its `/openapi.json`. Every operation in it is fuzzed, bounded, with a
valid token of each role (user, agent, operator, privacy, system), with data that fits the schema and
data that breaks it. Two properties must hold for every request: no answer is a 5xx, and every 4xx
is an RFC 9457 `application/problem+json` document with its `status` and a `code`. All failures are
collected and reported together, each with the operation, the role and a curl line to replay it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode

from memwarden.identity import mint_token
from tests.e2e.harness import Stack

TENANT = "fuzz"
EXAMPLES = {
    GenerationMode.POSITIVE: int(os.environ.get("MEMWARDEN_FUZZ_EXAMPLES", "3")),
    GenerationMode.NEGATIVE: int(os.environ.get("MEMWARDEN_FUZZ_NEGATIVE_EXAMPLES", "2")),
}
"""Per operation, role and mode: 20 operations x 5 roles x 5 examples, within ~a minute on two loaded cores."""
ROLES: dict[str, dict[str, object]] = {
    "user": {"sub": "alice"},
    "agent": {"sub": "planner-svc", "agent": "planner", "on_behalf_of": "alice", "stores": ["team"]},
    "operator": {"sub": "ops"},
    "privacy": {"sub": "dpo"},
    "system": {"sub": "crm-svc"},
}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    workdir = tmp_path_factory.mktemp("fuzz")
    s = Stack(data_dir=workdir / "data", cwd=workdir)
    s.start()
    try:
        s.wait_ready()
        yield s
    finally:
        s.kill()


def _token(data_dir: Path, role: str) -> str:
    secret = (data_dir / "auth.secret").read_text().strip()
    return mint_token(secret, tenant=TENANT, role=role, **ROLES[role])  # type: ignore[arg-type]


def _problem_shaped(response: schemathesis.Response) -> str | None:
    """Why a 4xx answer is not a problem document, or None when it is one (headers: name -> values)."""
    content_type = (response.headers.get("content-type") or [""])[0]
    if not content_type.startswith("application/problem+json"):
        return f"content-type {content_type!r}"
    body = response.json()
    if not isinstance(body, dict) or body.get("status") != response.status_code or not body.get("code"):
        return f"body {str(body)[:200]}"
    return None


def _prober(
    stack: Stack, strategy: object, examples: int, role: str, failures: list[str], seen: dict[str, set[int]]
) -> Callable[[], None]:
    """One bounded Hypothesis run of `strategy`'s cases against the stack, recording what breaks a rule."""

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=True,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=strategy)
    def probe(case: schemathesis.Case) -> None:
        response = case.call(base_url=stack.base_url, timeout=60)
        seen.setdefault(case.operation.label, set()).add(response.status_code)
        why = None
        if response.status_code >= 500:
            why = f"{response.status_code} {response.text[:200]}"
        elif response.status_code >= 400:
            why = _problem_shaped(response)
        if why is not None:
            failures.append(f"{case.operation.label} as {role}: {why}\n    {case.as_curl_command()}")

    return probe  # type: ignore[no-any-return]


def test_every_operation_with_every_role_answers_no_5xx_and_problem_json(stack: Stack) -> None:
    schema = schemathesis.openapi.from_url(f"{stack.base_url}/openapi.json")
    tokens = {role: _token(stack.data_dir, role) for role in ROLES}
    failures: list[str] = []
    seen: dict[str, set[int]] = {}
    started = time.monotonic()
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 20, [op.label for op in operations]  # the control: the whole document is read
    for operation in operations:
        for role, token in tokens.items():
            for mode, examples in EXAMPLES.items():
                strategy = operation.as_strategy(mode, headers={"Authorization": f"Bearer {token}"})
                try:
                    _prober(stack, strategy, examples, role, failures, seen)()
                except Unsatisfiable:
                    assert mode is GenerationMode.NEGATIVE, operation.label  # nothing to break (no parameters)
    took = time.monotonic() - started
    assert set(seen) == {op.label for op in operations}  # every operation was called
    answered = {label for label, codes in seen.items() if any(200 <= c < 300 for c in codes)}
    # The control: valid tokens got through to the routes (not every answer a 401 or a 422).
    assert {"POST /v1/memories", "POST /v1/search", "GET /v1/memories", "POST /v1/forget", "GET /v1/audit"} <= answered
    assert not any(401 in codes for codes in seen.values())  # every token was valid
    assert failures == [], "\n".join(failures[:20])
    assert took < 240, f"the bounded run took {took:.0f} s"
