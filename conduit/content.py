"""Buyer content: the columns that hold it, the permission that reads it, and the admin's guard.

A content column is declared where it is defined, as a `ContentField`, naming the permission
that reads it. Nothing may answer a question about its value without that permission: not
its display, and not a filter, search or ordering whose row count answers a guess
(`?message_text__startswith=a`, then `ab`, ... recovers the text one character at a time).
`guard_lookups` closes that door on every registered admin, Django's lookups on a model's
own fields included.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterator

from django.apps import apps
from django.core.exceptions import FieldDoesNotExist
from django.db import models
from django.db.models.constants import LOOKUP_SEP

if TYPE_CHECKING:  # models import this module: nothing of the admin's at import time
    from django.contrib import admin
    from django.http import HttpRequest

MESSAGE_CONTENT = "ingress.view_message_content"


class _Content:
    """What every content column shares: the permission that reads it."""

    def __init__(self, *args: Any, permission: str = MESSAGE_CONTENT, **kwargs: Any) -> None:
        self.permission = permission
        super().__init__(*args, **kwargs)

    def deconstruct(self) -> tuple:
        name, path, args, kwargs = super().deconstruct()  # type: ignore[misc]
        if self.permission != MESSAGE_CONTENT:
            kwargs["permission"] = self.permission
        return name, path, args, kwargs


class ContentField(_Content, models.TextField):
    """A text column holding what a buyer wrote; read only with `permission`."""


class ContentDigestField(_Content, models.CharField):
    """A digest of what a buyer wrote with fields shown beside it (an event's payload hash): it
    confirms a guessed text as surely as the text itself, so it is read only with `permission`."""


CONTENT_TYPES = (ContentField, ContentDigestField)


def content_fields() -> Iterator[models.Field]:
    """Every content column (text or digest) of every installed model."""
    for model in apps.get_models():
        for field in model._meta.get_fields():
            if isinstance(field, CONTENT_TYPES):
                yield field


def content_in_lookup(model: type[models.Model], lookup: str) -> models.Field | None:
    """The content column a lookup (`event__message_text__startswith`) reaches from `model`, or None.

    The path is followed through relations field by field, as the ORM does; the first part that
    is not a field (a transform or lookup such as `startswith`) ends it.
    """
    for part in lookup.split(LOOKUP_SEP):
        try:
            field = model._meta.get_field(part)
        except FieldDoesNotExist:
            return None
        if isinstance(field, CONTENT_TYPES):
            return field
        related = getattr(field, "related_model", None)
        if related is None:
            return None
        model = related
    return None


def may_read(request: HttpRequest, field: models.Field) -> bool:
    return request.user.has_perm(field.permission)


def _field_name(entry: Any) -> str:
    # search_fields entries carry a prefix ("=", "^", "@"); list_filter entries may be tuples.
    name = entry[0] if isinstance(entry, (tuple, list)) else entry
    return name.lstrip("=^@") if isinstance(name, str) else ""


def guard_admin(model_admin: admin.ModelAdmin) -> None:
    """Close every door of this admin to the content columns the user may not read.

    - A query-string lookup reaching one (`?message_text__startswith=`, also through a
      relation) is a disallowed lookup: Django answers 400, never a row count.
    - A search field or a sortable column reaching one is dropped for that user.
    - A page showing the row's fields leaves it out for that user.
    """
    model = model_admin.model
    allowed: Callable[..., bool] = model_admin.lookup_allowed
    search_fields: Callable[..., Any] = model_admin.get_search_fields
    sortable_by: Callable[..., Any] = model_admin.get_sortable_by
    fields: Callable[..., Any] = model_admin.get_fields

    def readable(request: HttpRequest | None, lookup: str) -> bool:
        field = content_in_lookup(model, lookup)
        return field is None or (request is not None and may_read(request, field))

    def lookup_allowed(lookup: str, value: Any, request: HttpRequest | None = None) -> bool:
        return readable(request, lookup) and allowed(lookup, value, request)

    def get_search_fields(request: HttpRequest) -> Any:
        return [f for f in search_fields(request) if readable(request, _field_name(f))]

    def get_sortable_by(request: HttpRequest) -> Any:
        return [f for f in sortable_by(request) if not isinstance(f, str) or readable(request, f)]

    def get_fields(request: HttpRequest, obj: Any = None) -> Any:
        return [f for f in fields(request, obj) if not isinstance(f, str) or readable(request, f)]

    model_admin.lookup_allowed = lookup_allowed  # type: ignore[method-assign]
    model_admin.get_fields = get_fields  # type: ignore[method-assign]
    model_admin.get_search_fields = get_search_fields  # type: ignore[method-assign]
    model_admin.get_sortable_by = get_sortable_by  # type: ignore[method-assign]
