"""Authentication and clearance over HTTP: no field, header or encoding widens a grant.

Every attempt below is made with the `internal-reader` key, granted `internal` and
`project:core`. Whatever it sends, the answer may only contain elements that grant sees; the
restricted decision, the confidential and restricted documents and the other project's
document must never appear — not as results, not as context, not in the explanation.
"""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path
from typing import Any

import jwt
import pytest
from http_fixtures import INTERNAL_CORE, QUESTION, Keys, Service, corpus, serve, service
from hypothesis import given
from hypothesis import strategies as st

from ontology import Sensitivity
from uda.embedding import Embedder
from uda.http import issue_token
from uda.http.auth import ApiKey, Authenticator, Principal
from uda.http.grants import decide
from uda.query.clearance import Clearance

GRANTED = {"doc:retries", "doc:ledger", "doc:core-plan", "repo:payments", "person:ada"}
__all__ = ["service"]  # a fixture

HIDDEN = {"adr:retry", "doc:costs", "doc:incident", "doc:other"}


def _ids(data: dict[str, Any]) -> set[str]:
    ids = {r["element_id"] for r in data["results"]}
    ids |= {n["element_id"] for r in data["results"] for n in r["context_nodes"]}
    return ids


def _assert_within_grant(response: Any) -> None:
    assert response.status_code == 200, response.text
    data = response.json()
    assert _ids(data) <= GRANTED
    assert not any(hidden in response.text for hidden in HIDDEN)
    effective = Clearance.parse(data["clearance"]["effective"])
    grant = Clearance.parse(INTERNAL_CORE)
    for level in Sensitivity:
        for scope in (None, "project:core", "project:other", "project:x"):
            if effective.allows(level, scope):
                assert grant.allows(level, scope), (level, scope)
    header = response.headers["x-uda-clearance"]
    assert not {"restricted", "confidential", "project:*", "project:other"} & set(header.split(","))


# -- the body asks for more than the grant ---------------------------------------------------


@pytest.mark.parametrize(
    "asked",
    [
        ["restricted"],
        ["restricted", "project:*"],
        ["confidential", "internal"],
        ["project:other"],
        ["project:*"],
        ["internal", "project:core", "project:other", "restricted"],
    ],
)
async def test_clearance_in_the_body_only_narrows(service: Service, asked: list[str]) -> None:
    body = {"query": QUESTION, "limit": 20, "clearance_scope": asked}
    response = await service.http.post(
        "/v1/search", json=body, headers={"X-API-Key": service.keys.internal}
    )
    _assert_within_grant(response)
    clearance = response.json()["clearance"]
    assert clearance["granted"] == INTERNAL_CORE
    assert clearance["capped"] is True  # it asked beyond the grant, and the answer says so
    assert (
        clearance["effective"]
        == Clearance.parse(INTERNAL_CORE).narrow(Clearance.parse(asked)).entries()
    )


async def test_asking_for_the_grant_or_less(service: Service) -> None:
    headers = {"X-API-Key": service.keys.internal}
    whole = await service.http.post(
        "/v1/search", json={"query": QUESTION, "limit": 20}, headers=headers
    )
    _assert_within_grant(whole)
    assert _ids(whole.json()) >= {"doc:retries", "doc:ledger", "doc:core-plan"}
    assert whole.json()["clearance"]["narrowed"] is False
    assert whole.json()["clearance"]["requested"] is None
    less = await service.http.post(
        "/v1/search", json={"query": QUESTION, "clearance_scope": []}, headers=headers
    )
    _assert_within_grant(less)
    assert {r["element_id"] for r in less.json()["results"]} == {"doc:retries"}
    assert less.json()["clearance"]["narrowed"] is True
    assert less.json()["clearance"]["capped"] is False
    assert less.headers["x-uda-clearance-narrowed"] == "true"


# -- other fields, headers and encodings -----------------------------------------------------

BODY = {"query": QUESTION, "limit": 20}
QUERY = json.dumps(QUESTION).encode()

ATTEMPTS: dict[str, dict[str, Any]] = {
    "x-clearance-header": {"headers": {"X-Clearance": "restricted"}},
    "x-uda-clearance-header": {"headers": {"X-UDA-Clearance": "restricted,project:*"}},
    "x-clearance-scope-header": {"headers": {"X-Clearance-Scope": "restricted"}},
    "forwarded-user": {"headers": {"X-Forwarded-User": "admin", "X-Remote-User": "admin"}},
    "query-string": {"params": {"clearance_scope": "restricted", "clearance": "project:*"}},
    "query-string-list": {"params": [("clearance_scope", "restricted"), ("limit", "100")]},
    "unicode-escaped-key": {
        "content": b'{"query": ' + QUERY + b', "clearance\\u005fscope": ["restricted"]}'
    },
    "unicode-escaped-value": {
        "content": b'{"query": ' + QUERY + b', "clearance_scope": ["\\u0072estricted"]}'
    },
    "filter-on-sensitivity": {"json": {**BODY, "context_filters": {"sensitivity": "restricted"}}},
    "filter-on-scope": {"json": {**BODY, "context_filters": {"scope": "project:other"}}},
}


@pytest.mark.parametrize("attempt", list(ATTEMPTS), ids=list(ATTEMPTS))
async def test_no_header_parameter_or_encoding_widens(service: Service, attempt: str) -> None:
    spec = dict(ATTEMPTS[attempt])
    headers = {"X-API-Key": service.keys.internal, **spec.pop("headers", {})}
    if "content" in spec:
        headers["Content-Type"] = "application/json"
    else:
        spec.setdefault("json", BODY)
    response = await service.http.post("/v1/search", headers=headers, **spec)
    _assert_within_grant(response)


@pytest.mark.parametrize(
    ("content", "status"),
    [
        (b'{"query": "q", "clearance_scope": ["public"], "clearance_scope": ["restricted"]}', 400),
        (b'{"query": "q", "clearance_scope": ["restricted"], "clearance_scope": ["public"]}', 400),
        (b'{"query": "q", "clearance\\u005fscope": [], "clearance_scope": ["restricted"]}', 400),
        (b'{"query": "q", "Clearance_Scope": ["restricted"]}', 422),
        (b'{"query": "q", "CLEARANCE_SCOPE": ["restricted"]}', 422),
        (b'{"query": "q", "clearance": ["restricted"]}', 422),
        (b'{"query": "q", "clearance_scope": "restricted"}', 422),
        (b'{"query": "q", "clearance_scope": [["restricted"]]}', 422),
        (b'{"query": "q", "clearance_scope": ["RESTRICTED"]}', 422),
        (b'{"query": "q", "clearance_scope": [" restricted"]}', 422),
        (b'{"query": "q", "clearance_scope": ["restricted\\u0000"]}', 422),
        (b'{"query": "q", "clearance_scope": ["project:"]}', 422),
        (b'{"query": "q", "clearance_scope": ["project:**"]}', 422),
        (b'{"query": "q", "clearance_scope": [1]}', 422),
        (b'{"query": "q", "options": {"clearance_scope": ["restricted"]}}', 422),
    ],
)
async def test_ambiguous_or_disguised_clearance_is_refused(
    service: Service, content: bytes, status: int
) -> None:
    headers = {"X-API-Key": service.keys.internal, "Content-Type": "application/json"}
    response = await service.http.post("/v1/search", content=content, headers=headers)
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert "results" not in response.json()


async def test_form_encoded_clearance_is_not_read(service: Service) -> None:
    response = await service.http.post(
        "/v1/search",
        data={"query": QUESTION, "clearance_scope": "restricted"},
        headers={"X-API-Key": service.keys.internal},
    )
    assert response.status_code == 415


# -- credentials -----------------------------------------------------------------------------


async def _search(service: Service, headers: dict[str, str] | list[tuple[str, str]]) -> Any:
    return await service.http.post("/v1/search", json={"query": QUESTION}, headers=headers)


def _assert_unauthenticated(response: Any, *, invalid_token: bool = False) -> None:
    assert response.status_code == 401, response.text
    assert response.headers["content-type"] == "application/problem+json"
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith('Bearer realm="uda"')
    assert ('error="invalid_token"' in challenge) is invalid_token
    assert "results" not in response.json()


async def test_missing_or_wrong_credentials_are_401(service: Service) -> None:
    _assert_unauthenticated(await _search(service, {}))
    _assert_unauthenticated(await _search(service, {"X-API-Key": "wrong"}))
    _assert_unauthenticated(await _search(service, {"X-API-Key": ""}))
    _assert_unauthenticated(await _search(service, {"X-API-Key": service.keys.internal + "x"}))
    _assert_unauthenticated(await _search(service, {"X-API-Key": service.keys.internal.upper()}))
    _assert_unauthenticated(await _search(service, {"Authorization": service.keys.internal}))
    _assert_unauthenticated(await _search(service, {"Authorization": "Basic dXNlcjpwYXNz"}))
    _assert_unauthenticated(await _search(service, {"Authorization": "Bearer"}))
    for path in ("/v1/ontology", "/v1/elements/doc:retries"):
        _assert_unauthenticated(await service.http.get(path))
    # A hashed key in the keys file is not itself a key.
    digest = next(k.sha256 for k in service.keys.entries() if k.name == "admin")
    _assert_unauthenticated(await _search(service, {"X-API-Key": digest}))


async def test_more_than_one_credential_is_refused(service: Service) -> None:
    keys = service.keys
    token = issue_token(keys.secret, subject="t", clearance=["restricted"])
    two_keys = [("X-API-Key", keys.internal), ("X-API-Key", keys.admin)]
    _assert_unauthenticated(await _search(service, two_keys))
    _assert_unauthenticated(await _search(service, list(reversed(two_keys))))
    mixed = {"X-API-Key": keys.internal, "Authorization": f"Bearer {token}"}
    _assert_unauthenticated(await _search(service, mixed))
    two_tokens = [("Authorization", f"Bearer {token}"), ("Authorization", f"Bearer {token}")]
    _assert_unauthenticated(await _search(service, two_tokens))


def _segments(token: str) -> list[str]:
    return token.split(".")


def _b64(data: dict[str, Any]) -> str:
    raw = json.dumps(data, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


async def test_tokens_grant_their_claims_and_nothing_else(service: Service) -> None:
    secret = service.keys.secret
    token = issue_token(secret, subject="analyst", clearance=["confidential"])
    response = await _search(service, {"Authorization": f"Bearer {token}"})
    assert response.status_code == 200, response.text
    assert response.json()["clearance"]["granted"] == ["confidential"]
    ids = {r["element_id"] for r in response.json()["results"]}
    assert "doc:costs" in ids
    assert not ids & {"doc:incident", "doc:core-plan", "doc:other"}
    lower = await _search(service, {"authorization": f"bearer {token}"})
    assert lower.status_code == 200


async def test_bad_tokens_are_401(service: Service) -> None:
    secret = service.keys.secret
    now = int(time.time())
    claims = {"sub": "mallory", "clearance": ["restricted", "project:*"], "exp": now + 600}
    good = issue_token(secret, subject="mallory", clearance=["public"])
    header, payload, signature = _segments(good)
    forged_payload = _b64({**json.loads(base64.urlsafe_b64decode(payload + "==")), **claims})
    bad = {
        "alg-none": f"{_b64({'alg': 'none', 'typ': 'JWT'})}.{_b64(claims)}.",
        "alg-none-with-signature": f"{_b64({'alg': 'none'})}.{_b64(claims)}.{signature}",
        "alg-hs512": jwt.encode(claims, secret, algorithm="HS512"),
        "alg-hs384": jwt.encode(claims, secret, algorithm="HS384"),
        "wrong-secret": jwt.encode(claims, "x" * 64, algorithm="HS256"),
        "tampered-payload": f"{header}.{forged_payload}.{signature}",
        "expired": jwt.encode({**claims, "exp": now - 5}, secret, algorithm="HS256"),
        "no-expiry": jwt.encode({"sub": "m", "clearance": ["public"]}, secret, algorithm="HS256"),
        "no-subject": jwt.encode({"exp": now + 60, "clearance": []}, secret, algorithm="HS256"),
        "clearance-not-a-list": jwt.encode(
            {**claims, "clearance": "restricted"}, secret, algorithm="HS256"
        ),
        "unknown-clearance": jwt.encode(
            {**claims, "clearance": ["top"]}, secret, algorithm="HS256"
        ),
        "can-write-not-bool": jwt.encode({**claims, "can_write": "yes"}, secret, algorithm="HS256"),
        "not-before": jwt.encode({**claims, "nbf": now + 600}, secret, algorithm="HS256"),
        "garbage": "a.b.c",
    }
    for name, token in bad.items():
        response = await _search(service, {"Authorization": f"Bearer {token}"})
        assert response.status_code == 401, name
        _assert_unauthenticated(response, invalid_token=True)


async def test_tokens_need_a_configured_secret(tmp_path: Path, embedder: Embedder) -> None:
    keys = Keys()
    async with serve(tmp_path / "uda", embedder, keys=keys) as running:
        token = issue_token(keys.secret, subject="t", clearance=["public"])
        keys_only = Authenticator(api_keys=keys.entries())
        running.app.state.auth = keys_only
        response = await _search(running, {"Authorization": f"Bearer {token}"})
        _assert_unauthenticated(response, invalid_token=True)


# -- anonymous access ------------------------------------------------------------------------


async def test_anonymous_callers_get_public_only(tmp_path: Path, embedder: Embedder) -> None:
    async with serve(tmp_path / "uda", embedder, anonymous=True) as running:
        body = {"query": QUESTION, "limit": 20, "clearance_scope": ["restricted", "project:*"]}
        response = await running.http.post("/v1/search", json=body)
        assert response.status_code == 200
        assert {r["element_id"] for r in response.json()["results"]} == {"doc:retries"}
        assert response.json()["clearance"]["granted"] == ["public"]
        assert response.json()["clearance"]["capped"] is True
        # Wrong credentials never fall back to anonymous access.
        _assert_unauthenticated(await _search(running, {"X-API-Key": "wrong"}))
        ingest = await running.http.post("/v1/ingest", json={"elements": []})
        assert ingest.status_code == 403


# -- hidden is missing, and hidden data changes nothing --------------------------------------


async def test_hidden_element_is_404_exactly_like_a_missing_one(service: Service) -> None:
    headers = {"X-API-Key": service.keys.internal}
    hidden = await service.http.get("/v1/elements/doc:incident", headers=headers)
    missing = await service.http.get("/v1/elements/doc:nowhere", headers=headers)
    visible = await service.http.get("/v1/elements/doc:ledger", headers=headers)
    assert visible.status_code == 200
    assert hidden.status_code == missing.status_code == 404
    one, two = hidden.json(), missing.json()
    assert one.pop("request_id") != two.pop("request_id")
    assert one == two
    assert "doc:incident" not in hidden.text
    drop = {"x-request-id"}
    assert {k: v for k, v in hidden.headers.items() if k not in drop} == {
        k: v for k, v in missing.headers.items() if k not in drop
    }
    # The other project's element and a restricted decision: the same.
    for element_id in ("doc:other", "adr:retry", "doc:costs"):
        response = await service.http.get(f"/v1/elements/{element_id}", headers=headers)
        body = response.json()
        body.pop("request_id")
        assert (response.status_code, body) == (404, two)


def _semantic_raw(explained: dict[str, Any]) -> list[float | None]:
    legs = [r["legs"].get("semantic", {}) for r in explained["results"]]
    return [value for leg in legs for value in (leg.get("raw"), leg.get("score"))]


def _without_semantic_raw(explained: dict[str, Any]) -> list[dict[str, Any]]:
    stripped: list[dict[str, Any]] = []
    for result in explained["results"]:
        legs = dict(result["legs"])
        if "semantic" in legs:
            legs["semantic"] = {
                k: v for k, v in legs["semantic"].items() if k not in {"raw", "score"}
            }
        stripped.append({**result, "legs": legs})
    return stripped


async def test_hidden_elements_change_nothing_a_caller_sees(
    tmp_path: Path, embedder: Embedder
) -> None:
    """The public caller gets the same answer with and without the hidden elements stored."""
    elements, relations = corpus()
    public = [e for e in elements if e.element_id in {"doc:retries", "repo:payments", "person:ada"}]
    kept = {e.element_id for e in public}
    linked = [r for r in relations if r.source_id in kept and r.target_id in kept]
    keys = Keys()
    answers: list[tuple[Any, Any, Any]] = []
    for name, (els, rels) in {"full": (elements, relations), "public": (public, linked)}.items():
        async with serve(
            tmp_path / name, embedder, keys=keys, elements=els, relations=rels
        ) as running:
            headers = {"X-API-Key": keys.public}
            body = {"query": QUESTION, "limit": 20, "decay": False}
            searched = await running.http.post("/v1/search", json=body, headers=headers)
            explained = await running.http.post("/v1/explain", json=body, headers=headers)
            element = await running.http.get("/v1/elements/doc:retries", headers=headers)
            answers.append((searched.json(), explained.json(), element.json()))
    (full, full_explain, full_element), (alone, alone_explain, alone_element) = answers

    def stable(result: dict[str, Any]) -> dict[str, Any]:
        # Store-assigned stamps differ between two stores; everything else must not.
        def clean(props: dict[str, Any]) -> dict[str, Any]:
            return {k: v for k, v in props.items() if k not in {"hlc", "timestamp"}}

        return {
            **result,
            "properties": clean(result["properties"]),
            "context_nodes": [
                {**n, "properties": clean(n["properties"])} for n in result["context_nodes"]
            ],
        }

    assert [stable(r) for r in full["results"]] == [stable(r) for r in alone["results"]]
    # A passage's vector depends on the batch it was embedded in by float32 rounding (the
    # batch is padded to its longest text, and the kernels' blocking follows the shape):
    # the two stores hold the public passages embedded beside different texts. Cosines are
    # held to that rounding; every rank, score and contribution must be identical.
    assert _semantic_raw(full_explain) == pytest.approx(_semantic_raw(alone_explain), rel=1e-6)
    assert _without_semantic_raw(full_explain) == _without_semantic_raw(alone_explain)
    assert stable(full_element) == stable(alone_element)


# -- the rule itself, exhaustively -----------------------------------------------------------

ENTRIES = [
    "public",
    "internal",
    "confidential",
    "restricted",
    "project:a",
    "project:b",
    "project:*",
]


@given(
    grant=st.lists(st.sampled_from(ENTRIES), max_size=4),
    asked=st.none() | st.lists(st.sampled_from(ENTRIES), max_size=4),
)
def test_a_request_never_sees_beyond_its_grant_or_its_request(
    grant: list[str], asked: list[str] | None
) -> None:
    principal = Principal(name="p", clearance=Clearance.parse(grant))
    decision = decide(principal, asked)
    requested = Clearance.parse(asked) if asked is not None else principal.clearance
    for level in Sensitivity:
        for scope in (None, "project:a", "project:b", "project:c"):
            if decision.effective.allows(level, scope):
                assert principal.clearance.allows(level, scope)
                assert requested.allows(level, scope)
    assert decision.capped == (
        asked is not None and decision.effective.entries() != requested.entries()
    )


def test_a_principal_from_a_key_file_entry_has_exactly_its_grant() -> None:
    keys = Keys()
    auth = Authenticator(api_keys=keys.entries())
    found = auth.authenticate({"x-api-key": [keys.writer]})
    assert found == Principal(
        name="internal-writer", clearance=Clearance.parse(INTERNAL_CORE), can_write=True
    )
    entry = ApiKey(name="n", sha256="0" * 64, clearance=Clearance())
    assert Authenticator(api_keys=[entry]).configured
    assert not Authenticator(allow_anonymous=True).configured
