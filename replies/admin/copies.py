"""Approved copy in the admin: a new text is a new version."""

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest

from replies import services
from replies.models import ReplyCopy


class ReplyCopyForm(forms.ModelForm):
    class Meta:
        model = ReplyCopy
        fields = ["source", "purpose", "channel", "text", "template"]


@admin.register(ReplyCopy)
class ReplyCopyAdmin(admin.ModelAdmin):
    """Approved copy: adding a text makes a new version; versions are never edited or deleted."""

    form = ReplyCopyForm
    list_display = ("source", "purpose", "copy_version", "channel", "created_by", "created_at")
    list_filter = ("source", "purpose")

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def save_model(self, request: HttpRequest, obj: ReplyCopy, form: forms.ModelForm, change: bool) -> None:
        try:
            copy, _ = services.reply_copy_create(
                source_id=obj.source_id,
                purpose=obj.purpose,
                channel=obj.channel,
                text=obj.text,
                actor=request.user.get_username(),
                template=obj.template or None,
            )
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from None
        obj.pk = copy.pk
        obj.copy_version = copy.copy_version

    def get_form(self, request: HttpRequest, obj: Any = None, **kwargs):
        form = super().get_form(request, obj, **kwargs)

        def clean(form_self) -> dict:
            data = forms.ModelForm.clean(form_self)
            source, purpose = data.get("source"), data.get("purpose", "")
            if source and purpose not in source.purposes:
                raise forms.ValidationError(f"{purpose!r} is not a declared purpose of {source.name}")
            return data

        form.clean = clean
        return form
