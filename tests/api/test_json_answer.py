"""json_answer: the webhooks' answers, written without a Response, are byte for byte what a Response
under JSONOnly would have answered: the same status, headers and body, for any payload."""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from decimal import Decimal

import pytest
from django.db import models
from django.utils.translation import gettext_lazy
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.test import APIRequestFactory
from rest_framework.views import APIView

from conduit import api
from conduit.api import JSONOnly, json_answer


class _Answer(APIView):
    """The webhooks' view settings; answers `payload` one way or the other."""

    authentication_classes: list = []
    permission_classes: list = []
    parser_classes: list = []
    content_negotiation_class = JSONOnly
    answer = staticmethod(json_answer)

    def post(self, request, *, payload, status_code):
        return self.answer(payload, status_code)


def _as_response(payload, status_code):
    return Response(payload, status=status_code)


def _answered(answer, payload, status_code: int = 200, accept: str = "application/json; indent=4"):
    """The finished response's status, headers and bytes, as the handler sends them."""
    request = APIRequestFactory().post(
        "/webhooks/x/", b"{}", content_type="application/json", HTTP_ACCEPT=accept
    )
    response = _Answer.as_view(answer=answer)(request, payload=payload, status_code=status_code)
    if hasattr(response, "render"):
        response.render()
    return response.status_code, sorted(response.items()), response.content


def assert_same_answer(payload, status_code: int = 200) -> None:
    try:
        expected = _answered(_as_response, payload, status_code)
    except (ValueError, UnicodeEncodeError) as refused:  # what DRF's rendering refuses, this refuses
        with pytest.raises(type(refused)):
            _answered(json_answer, payload, status_code)
        return
    assert _answered(json_answer, payload, status_code) == expected


_scalars = (
    st.text()  # any text but surrogates: non-ASCII, control characters, U+2028 and U+2029
    | st.sampled_from(["\u2028", "a\u2029b", "é", "\ud800", "\x00", "</script>"])  # a lone surrogate
    | st.integers()
    | st.floats()  # NaN and the infinities too: refused either way
    | st.booleans()
    | st.none()
)
_payloads = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@hsettings(max_examples=300, deadline=None)
@given(_payloads, st.sampled_from([200, 202]))
def test_any_json_payload_is_answered_as_a_response_would_be(payload, status_code):
    assert_same_answer(payload, status_code)


@pytest.mark.parametrize(
    "payload", [{"delivery_id": "d", "results": [{"index": 0}]}, None], ids=["json", "none"]
)
def test_the_answer_keeps_its_payload_as_data(payload):
    """The answer keeps its payload as a Response's `data` (the webhook metrics count the events
    of its results), whether it is written at once or, for None, left to a Response."""
    answer = json_answer(payload, 200)
    assert isinstance(answer, Response) is (payload is None)
    assert answer.data is payload


class _Kind(models.TextChoices):
    NEW = "new"


@pytest.mark.parametrize(
    "payload",
    [
        {"delivery_id": "d\u2028", "results": [{"index": 0, "result": "new", "event_key": "k\u2029é"}]},
        {"at": datetime(2026, 1, 15, 14, 30, 0, 123456, tzinfo=timezone.utc)},  # DRF's own time text
        {"amount": Decimal("1.10")},
        {"id": uuid.UUID(int=7)},
        {"label": gettext_lazy("refused")},
        {"state": _Kind.NEW, "big": 2**80, "nested": [[{"a": (1, 2)}]]},
        [],
        {},
    ],
    ids=["separators", "time", "decimal", "uuid", "lazy", "subclasses", "empty-list", "empty-dict"],
)
def test_awkward_payloads_are_answered_as_a_response_would_be(payload):
    assert_same_answer(payload)


def test_control_an_answer_in_ascii_is_told_apart(monkeypatch):
    """Positive control: written by a renderer with another setting, the comparison fails on the
    first non-ASCII text (é goes as its escape where the Response wrote it in UTF-8)."""
    ascii_renderer = type("AsciiRenderer", (JSONRenderer,), {"ensure_ascii": True})()
    monkeypatch.setattr(api, "_RENDERER", ascii_renderer)
    with pytest.raises(AssertionError):
        assert_same_answer({"event_key": "é"})
    assert_same_answer({"event_key": "e"})  # ASCII text is written the same either way
