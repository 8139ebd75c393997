"""API parts every endpoint shares: the error shape (a JSON body with a stable `code` and a `detail`),
the door, the JSON parser, and what every read list shares (pagination, query checks, OpenAPI parts)."""

from __future__ import annotations

import json
import math
import unicodedata
from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig, SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views import defaults
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions, serializers, status
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.pagination import Cursor, CursorPagination
from rest_framework.parsers import JSONParser as DRFJSONParser
from rest_framework.permissions import BasePermission
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response

from conduit.door.site import second_factor_required

# The deepest JSON body any endpoint accepts. The decision request is 3 levels
# deep; the bound keeps the schema validator and every walk of the document far
# from Python's recursion limit.
MAX_JSON_DEPTH = 32


class JSONOnly(BaseContentNegotiation):
    """A webhook answers JSON whatever its sender's Accept header says: a provider reads the
    status, and refusing it a 406 would only earn a retry. No header is parsed to decide it."""

    def select_parser(self, request, parsers):
        return parsers[0] if parsers else None

    def select_renderer(self, request, renderers, format_suffix=None):
        return renderers[0], renderers[0].media_type


class SecondFactorRequired(exceptions.PermissionDenied):
    default_detail = (
        "CONDUIT_ADMIN_2FA=required: this session has not been verified with an "
        "authenticator code; sign in to the admin again"
    )
    default_code = "second_factor_required"


class NotStaff(exceptions.PermissionDenied):
    default_detail = "a session reads the API only as a staff member, as the admin does"
    default_code = "not_staff"


class MissingPermission(exceptions.PermissionDenied):
    default_code = "permission_denied"


class AdminRules(BasePermission):
    """The API's door is the admin's: a session answers to the admin's rules, a token to its user's
    permissions.

    - A session (the admin's cookie) must belong to an active staff member and, while
      CONDUIT_ADMIN_2FA=required, be verified by a TOTP device (django-otp), as the admin asks.
    - A token acts as its user: no second factor (the token is the credential a superuser
      minted), but the same model permissions.
    - Either way the user holds every permission the view names in `required_permissions`
      (the admin's view permission of the ledger it reads).
    """

    def has_permission(self, request: Any, view: Any) -> bool:
        user = request.user
        if not (user and user.is_authenticated and user.is_active):
            return False
        if request.auth is None:
            if not user.is_staff:
                raise NotStaff()
            if second_factor_required() and not user.is_verified():
                raise SecondFactorRequired()
        missing = [name for name in getattr(view, "required_permissions", ()) if not user.has_perm(name)]
        if missing:
            raise MissingPermission(f"this reads what the admin shows only with {', '.join(missing)}")
        return True


def error(status_code: int, code: str, detail: str, **extra: Any) -> Response:
    return Response({"code": code, "detail": detail, **extra}, status=status_code)


# The renderer a Response under JSONOnly renders with (JSON, no indent: JSONOnly reads no
# Accept header).
_RENDERER = JSONRenderer()


def json_answer(payload: Any, status_code: int) -> HttpResponse:
    """`payload` answered as a Response under JSONOnly is, byte for byte, without the Response.

    A Response is a template response, rendered after the view through the negotiated renderer.
    Here the same renderer writes the payload at once, and the answer keeps it as `data`, as a
    Response does (conduit.metrics counts the events of its `results`). None takes a Response,
    which answers it with no body and no Content-Type."""
    if payload is None:
        return Response(payload, status=status_code)
    content = _RENDERER.render(payload, _RENDERER.media_type, {})
    response = HttpResponse(content, status=status_code, content_type=_RENDERER.media_type)
    response.data = payload  # as a Response keeps it: the webhook metrics count its results
    return response


class PayloadTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "the request body is larger than this server accepts"
    default_code = "payload_too_large"


class BadRequest(exceptions.APIException):
    status_code = status.HTTP_400_BAD_REQUEST
    default_detail = "the request could not be read"
    default_code = "bad_request"


def _finite_float(text: str) -> float:
    # 1e400 parses to inf, which no endpoint can mean and the renderer cannot write back.
    value = float(text)
    if not math.isfinite(value):
        raise ValueError("a number is out of the range of a double")
    return value


def _refuse_constant(name: str) -> None:
    raise ValueError(f"{name} is not valid JSON")


def _is_unicode_text(value: str) -> bool:
    """False for a string holding a lone surrogate (valid in Python, not in Unicode text)."""
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def json_refusal(document: Any) -> exceptions.ParseError | None:
    """Why a parsed JSON document is refused (nesting too deep, a lone surrogate), or None.

    Iterative, so that it cannot itself run out of stack.
    """
    stack = [(document, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, (dict, list)):
            if depth > MAX_JSON_DEPTH:
                return exceptions.ParseError(
                    f"JSON nested deeper than {MAX_JSON_DEPTH} levels", code="nesting_too_deep"
                )
            children = value.items() if isinstance(value, dict) else ((None, item) for item in value)
            for key, item in children:
                if isinstance(key, str) and not _is_unicode_text(key):
                    return _surrogate()
                stack.append((item, depth + 1))
        elif isinstance(value, str) and not _is_unicode_text(value):
            return _surrogate()
    return None


def _surrogate() -> exceptions.ParseError:
    return exceptions.ParseError(
        "a string holds a lone surrogate (\\ud800-\\udfff unpaired), which is not Unicode text",
        code="invalid_unicode",
    )


class JSONParser(DRFJSONParser):
    """DRF's JSON parser, refusing at input what no endpoint can answer for.

    UTF-8 only (RFC 8259), no NaN/Infinity and no number overflowing a double,
    at most MAX_JSON_DEPTH levels (the decoder's RecursionError is a 400, not a
    500), and no lone surrogate anywhere (it would reach a response and fail to
    encode). Each refusal is a ParseError with its own code.
    """

    def parse(self, stream, media_type=None, parser_context=None) -> Any:
        try:
            text = stream.read().decode("utf-8")
        except UnicodeDecodeError:
            raise exceptions.ParseError("JSON parse error - the body is not UTF-8") from None
        try:
            document = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
        except RecursionError:
            raise exceptions.ParseError(
                f"JSON nested deeper than {MAX_JSON_DEPTH} levels", code="nesting_too_deep"
            ) from None
        except ValueError as exc:
            # json's messages name a position, never the input itself.
            raise exceptions.ParseError(f"JSON parse error - {exc}") from None
        refusal = json_refusal(document)
        if refusal is not None:
            raise refusal
        return document


# Query parameters: Django decodes the query string with replacement characters,
# so no surrogate arrives; NUL (which PostgreSQL refuses in text), the other
# control characters and line separators are refused here, before any query.
_REFUSED_CATEGORIES = {"Cc", "Cs", "Zl", "Zp"}


def refuse_control_characters(value: str) -> None:
    if any(unicodedata.category(char) in _REFUSED_CATEGORIES for char in value):
        raise serializers.ValidationError(
            "control characters (NUL, C0, DEL, C1), line separators and surrogates are not allowed",
            code="control_character",
        )


class QueryText(serializers.CharField):
    """A printable, bounded query parameter, taken as sent (no trimming)."""

    def __init__(self, *, max_length: int, **kwargs: Any) -> None:
        super().__init__(
            max_length=max_length,
            required=False,
            allow_blank=True,
            trim_whitespace=False,
            validators=[refuse_control_characters],
            **kwargs,
        )


# -- what every read list shares ---------------------------------------------------------------

MAX_PAGE_SIZE = 500
# A cursor is DRF's base64 of a short query string; anything longer is not one of ours.
MAX_CURSOR_LENGTH = 200
MAX_ID = 2**63 - 1  # bigint: the position is an id


class InvalidCursor(exceptions.APIException):
    status_code = status.HTTP_400_BAD_REQUEST
    default_detail = "the cursor is not one this API issued"
    default_code = "invalid_cursor"


class NewestFirst(CursorPagination):
    ordering = "-id"
    page_size = 50
    max_page_size = MAX_PAGE_SIZE
    page_size_query_param = "page_size"

    def decode_cursor(self, request) -> Cursor | None:
        # DRF answers a malformed cursor with a 404 and passes its position to
        # the query unchecked (a non-number was a 500): both are a 400 here.
        try:
            cursor = super().decode_cursor(request)
        except exceptions.NotFound:
            raise InvalidCursor() from None
        if cursor is not None and cursor.position is not None:
            position = cursor.position
            if not (position.isascii() and position.isdigit() and int(position) <= MAX_ID):
                raise InvalidCursor()
        return cursor


class ListQuery(serializers.Serializer):
    """The query parameters every list takes: printable and bounded, or a 400 naming each one."""

    cursor = QueryText(max_length=MAX_CURSOR_LENGTH)
    page_size = serializers.IntegerField(min_value=1, max_value=10**9, required=False)


def validated_query(serializer_class: type[serializers.Serializer], request) -> dict[str, Any]:
    query = serializer_class(data=request.query_params.dict())
    query.is_valid(raise_exception=True)
    return query.validated_data


# The OpenAPI parts of a list, merged into /api/schema/ (console/api/schema.py).
# The pattern says what refuse_control_characters refuses, so that generated
# "valid" values are valid and generated invalid ones must be refused.
_PRINTABLE = "^[^\\x00-\\x1f\\x7f-\\x9f\\u2028\\u2029]*$"


def text_parameter(name: str, max_length: int, description: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "query",
        "required": False,
        "description": description,
        "schema": {"type": "string", "maxLength": max_length, "pattern": _PRINTABLE},
    }


def list_parameters() -> list[dict[str, Any]]:
    return [
        text_parameter("cursor", MAX_CURSOR_LENGTH, "the opaque cursor of a `next` or `previous` link"),
        {
            "name": "page_size",
            "in": "query",
            "required": False,
            "description": f"results per page, at most {MAX_PAGE_SIZE} (a larger number is read as {MAX_PAGE_SIZE})",
            "schema": {"type": "integer", "minimum": 1, "maximum": 10**9},
        },
    ]


def date_time_schema() -> dict[str, Any]:
    return {"type": "string", "format": "date-time"}


def page_schema(item_ref: str) -> dict[str, Any]:
    link = {"type": ["string", "null"], "format": "uri"}
    return {
        "type": "object",
        "required": ["next", "previous", "results"],
        "additionalProperties": False,
        "properties": {
            "next": link,
            "previous": link,
            "results": {"type": "array", "items": {"$ref": item_ref}},
        },
    }


def list_operation(summary: str, page_ref: str, parameters: list[dict[str, Any]]) -> dict[str, Any]:
    def refusal(description: str) -> dict[str, Any]:
        return {
            "description": description,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
        }

    return {
        "summary": summary,
        "parameters": parameters + list_parameters(),
        "responses": {
            "200": {
                "description": "One page, newest first",
                "content": {"application/json": {"schema": {"$ref": page_ref}}},
            },
            "400": refusal("`invalid` with `errors` naming each refused parameter, or `invalid_cursor`"),
            "401": refusal("`not_authenticated`: no token or session"),
            "403": refusal(
                "`not_staff` (a session of a user who is not staff), `second_factor_required` "
                "(a session not verified while CONDUIT_ADMIN_2FA=required) or `permission_denied` "
                "(the user lacks the ledger's view permission)"
            ),
            "404": refusal("`not_found`: an unknown `format`"),
            "406": refusal("`not_acceptable`: only application/json is served"),
        },
    }


def exception_handler(exc: Exception, context: dict) -> Response | None:
    """DRF's handler, with a stable `code` beside `detail`, for Django's exceptions too."""
    # Imported here: rest_framework.views reads DEFAULT_PARSER_CLASSES, which names this module.
    from rest_framework.views import exception_handler as drf_exception_handler

    if isinstance(exc, RequestDataTooBig):
        exc = PayloadTooLarge()
    elif isinstance(exc, SuspiciousOperation):
        exc = BadRequest()
    elif isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied()
    response = drf_exception_handler(exc, context)
    if response is not None and isinstance(response.data, dict) and "code" not in response.data:
        codes = getattr(exc, "get_codes", lambda: None)()
        response.data = {
            "code": codes if isinstance(codes, str) else getattr(exc, "default_code", "error"),
            **(
                {"detail": response.data["detail"]}
                if "detail" in response.data
                else {"errors": response.data}
            ),
        }
    return response


# Errors raised outside a DRF view (URL resolution, middleware, an uncaught bug)
# reach Django's handlers: under /api/ they answer the same JSON contract, and
# everywhere else (the admin) Django's HTML pages.


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


def _json_error(status_code: int, code: str, detail: str) -> JsonResponse:
    return JsonResponse({"code": code, "detail": detail}, status=status_code)


def handler400(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if not _is_api(request):
        return defaults.bad_request(request, exception)
    if isinstance(exception, RequestDataTooBig):
        return _json_error(413, PayloadTooLarge.default_code, str(PayloadTooLarge.default_detail))
    return _json_error(400, BadRequest.default_code, str(BadRequest.default_detail))


def handler403(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if not _is_api(request):
        return defaults.permission_denied(request, exception)
    return _json_error(403, "permission_denied", "You do not have permission to perform this action.")


def handler404(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if not _is_api(request):
        return defaults.page_not_found(request, exception)
    return _json_error(404, "not_found", "No API endpoint at this path.")


def handler500(request: HttpRequest) -> HttpResponse:
    if not _is_api(request):
        return defaults.server_error(request)
    return _json_error(500, "server_error", "An unexpected error; it has been logged.")


@csrf_exempt
def api_not_found(request: HttpRequest, rest: str = "") -> HttpResponse:
    """Any method on an unknown path under /api/: a JSON 404, also when DEBUG is on."""
    return _json_error(404, "not_found", "No API endpoint at this path.")
