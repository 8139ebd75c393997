"""API error shape: every refusal is a JSON body with a stable `code` and a `detail`."""

from typing import Any

from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler


def error(status_code: int, code: str, detail: str, **extra: Any) -> Response:
    return Response({"code": code, "detail": detail, **extra}, status=status_code)


def exception_handler(exc: Exception, context: dict) -> Response | None:
    """DRF's handler, with a stable `code` added beside `detail`."""
    response = drf_exception_handler(exc, context)
    if response is not None and isinstance(response.data, dict) and "code" not in response.data:
        codes = getattr(exc, "get_codes", lambda: None)()
        response.data = {
            "code": codes if isinstance(codes, str) else getattr(exc, "default_code", "error"),
            **({"detail": response.data["detail"]} if "detail" in response.data else {"errors": response.data}),
        }
    return response

