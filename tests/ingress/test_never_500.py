"""Seeded random mutations of signed deliveries: every answer is a documented status, never a 500."""

import json
import random

import pytest
from django.test import Client

from tests.conftest import fixture_body, sign

DOCUMENTED = {200, 202, 401, 404, 413}
HEADER_NOISE = ["", " ", "v1,", "v1,=", "v1, ", ",", "\t", "0", "-1", "1e3", "𝟙𝟚𝟛", "v1,AAAA v1", "x" * 300]


def mutate_headers(rng: random.Random, headers: dict) -> dict:
    headers = dict(headers)
    name = rng.choice(list(headers))
    choice = rng.random()
    if choice < 0.3:
        headers.pop(name)
    elif choice < 0.7:
        headers[name] = rng.choice(HEADER_NOISE)
    else:
        value = headers[name]
        cut = rng.randrange(len(value) + 1)
        headers[name] = value[:cut] + rng.choice(HEADER_NOISE) + value[cut:]
    return headers


def mutate_body(rng: random.Random, document: dict) -> bytes:
    doc = json.loads(json.dumps(document))
    event = doc["events"][0]
    key = rng.choice(list(event) + ["account", "events"])
    junk = rng.choice([None, 0, -1, 1.5, True, [], {}, "", " ", "\u0000", "é" * 250, ["a"], {"a": 1}])
    if key == "account":
        doc["account"] = junk
    elif key == "events":
        doc["events"] = junk
    elif rng.random() < 0.5:
        event.pop(key)
    else:
        event[key] = junk
    return json.dumps(doc).encode()


@pytest.mark.usefixtures("sandbox_source")
def test_random_mutations_never_produce_a_server_error():
    client = Client(raise_request_exception=False)
    rng = random.Random(20261129)
    document = json.loads(fixture_body("comment__northstar"))
    seen = set()
    for round_ in range(300):
        body = mutate_body(rng, document) if rng.random() < 0.6 else fixture_body("comment__northstar")
        headers = sign(body)
        if rng.random() < 0.5:
            headers = mutate_headers(rng, headers)
        response = client.post(
            "/webhooks/sandbox/", data=body, content_type="application/json", headers=headers
        )
        assert response.status_code in DOCUMENTED, (round_, response.status_code, response.content[:300])
        assert "code" in response.json() or "results" in response.json()
        seen.add(response.status_code)
    assert {200, 202, 401} <= seen
