"""Campaigns in the admin: made and edited by owners and campaign editors, with their copy per
purpose; their preview, catch-up, activity, state and post-picker pages are
replies.admin.campaign_pages'."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.http import HttpRequest

from ingress.models import Source
from replies import selectors
from replies.admin.campaign_pages import STATE_BUTTONS, CampaignPages
from replies.models import Campaign, CampaignState, CampaignVersion
from replies.services import (
    CampaignRefused,
    campaign_copy_set,
    campaign_create,
    campaign_state_set,
    campaign_update,
)
from replies.services.campaigns import STATE_MOVES, _rule_checked, _texts_checked, copy_sets_current

EDIT = "replies.edit_campaign"
VARIANT_BREAK = "---"
# What the form edits besides the copy boxes, in the page's order.
FORM_FIELDS = [
    "name",
    "source",
    "every_post",
    "posts_text",
    "keywords_text",
    "any_comment",
    "top_level_only",
    "starts_at",
    "ends_at",
]


def _lines(value: str) -> list[str]:
    return [line.strip() for line in value.replace(",", "\n").splitlines() if line.strip()]


def _variants(value: str) -> list[str]:
    """A copy box's variants: texts separated by a line holding only ---."""
    texts, current = [], []
    for line in value.splitlines():
        if line.strip() == VARIANT_BREAK:
            texts.append("\n".join(current).strip())
            current = []
        else:
            current.append(line)
    texts.append("\n".join(current).strip())
    return [t for t in texts if t]


def _declared_purposes() -> list[str]:
    purposes: dict[str, None] = {}
    for declared in Source.objects.values_list("purposes", flat=True):
        purposes.update(dict.fromkeys(declared))
    return list(purposes)


class CampaignForm(forms.ModelForm):
    posts_text = forms.CharField(
        label="Posts",
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="The ids of the posts or media it covers, one per line; or pick them from the account's "
        "recent posts (the link above). Leave empty with “Every post”.",
    )
    keywords_text = forms.CharField(
        label="Keywords",
        required=False,
        help_text="Comma-separated; any of them as a whole word, ignoring case. Leave empty with “Any comment”.",
    )

    class Meta:
        model = Campaign
        fields = FORM_FIELDS

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        campaign = self.instance
        if campaign.pk and "source" in self.fields:
            self.fields["source"].disabled = True
            self.initial["posts_text"] = "\n".join(campaign.posts)
            self.initial["keywords_text"] = ", ".join(campaign.keywords)
        current = copy_sets_current(campaign_id=campaign.pk) if campaign.pk else {}
        # A person who may only view gets the form without fields (the admin shows them read-only).
        self.purposes = _declared_purposes() if self.fields else []
        for purpose in self.purposes:
            self.fields[f"copy_{purpose}"] = forms.CharField(
                label=f"Copy: {purpose}",
                required=False,
                widget=forms.Textarea(attrs={"rows": 3}),
                initial=f"\n{VARIANT_BREAK}\n".join(c.text for c in current.get(purpose, [])),
                help_text=f"The approved text for {purpose}. Several texts, each separated by a line "
                f"holding only {VARIANT_BREAK}, are variants: each reply uses one, the same one always for "
                "the same reply. Leave empty where this campaign does not answer with it.",
            )

    def copies(self) -> dict[str, list[str]]:
        return {
            purpose: _variants(self.cleaned_data.get(f"copy_{purpose}", ""))
            for purpose in self.purposes
            if _variants(self.cleaned_data.get(f"copy_{purpose}", ""))
        }

    def clean(self) -> dict:
        data = super().clean()
        source = data.get("source") or (self.instance.source if self.instance.pk else None)
        if source is None or self.errors:
            return data
        copies = self.copies()
        candidate = Campaign(
            source=source,
            every_post=data.get("every_post", False),
            posts=_lines(data.get("posts_text", "")),
            keywords=[k.strip() for k in data.get("keywords_text", "").split(",") if k.strip()],
            any_comment=data.get("any_comment", False),
            top_level_only=data.get("top_level_only", False),
            purposes=[] if self.instance.account_default else list(copies),
            starts_at=data.get("starts_at"),
            ends_at=data.get("ends_at"),
        )
        try:
            if not copies and not self.instance.account_default:
                raise CampaignRefused("give the approved copy for at least one purpose")
            undeclared = [p for p in copies if p not in source.purposes]
            if undeclared:
                raise CampaignRefused(
                    f"{undeclared[0]!r} is not a declared purpose of source {source.name!r} "
                    f"(declared: {', '.join(source.purposes) or 'none'}): leave its copy empty"
                )
            for texts in copies.values():
                _texts_checked(texts)
            if candidate.starts_at is None:
                raise CampaignRefused("give the time it starts")
            _rule_checked(candidate, source, default=self.instance.account_default)
        except CampaignRefused as refused:
            raise forms.ValidationError(str(refused)) from None
        self.rule = candidate
        return data


@admin.register(Campaign)
class CampaignAdmin(CampaignPages, admin.ModelAdmin):
    form = CampaignForm
    list_display = ("name", "source", "state", "scope", "rule", "version", "starts_at", "ends_at")
    list_filter = ("state", "source")
    search_fields = ("name",)
    actions = ["activate", "pause", "end"]
    readonly_fields = ("state", "version", "activated_at", "account_default", "copy_now", "versions")
    change_form_template = "admin/replies/campaign/change_form.html"

    # -- permissions: owners and campaign editors edit; reviewers read -------------------------
    def has_add_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(EDIT)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.has_perm(EDIT) and (obj is None or obj.state != CampaignState.ENDED)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # events name the campaign that matched them: a campaign is ended, never deleted

    def has_edit_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(EDIT)

    # -- columns -------------------------------------------------------------------------------
    @admin.display(description="scope")
    def scope(self, obj: Campaign) -> str:
        return (
            "every post" if obj.every_post else f"{len(obj.posts)} post{'s' if len(obj.posts) != 1 else ''}"
        )

    @admin.display(description="rule")
    def rule(self, obj: Campaign) -> str:
        words = (
            "any comment" if obj.any_comment else (", ".join(obj.keywords) or "no keywords: matches nothing")
        )
        return words + (" (top-level only)" if obj.top_level_only else "")

    @admin.display(description="approved copy now")
    def copy_now(self, obj: Campaign) -> str:
        sets = copy_sets_current(campaign_id=obj.pk) if obj.pk else {}
        return (
            "; ".join(
                f"{purpose}: " + " | ".join(f"{c.copy_version} ({c.channel}) {c.text}" for c in copies)
                for purpose, copies in sets.items()
            )
            or "none yet"
        )

    @admin.display(description="versions")
    def versions(self, obj: Campaign) -> str:
        rows = CampaignVersion.objects.filter(campaign=obj).order_by("-version")[:10]
        return (
            "; ".join(f"v{v.version} by {v.created_by} at {v.created_at:%Y-%m-%d %H:%M}" for v in rows) or "-"
        )

    def get_fieldsets(self, request: HttpRequest, obj: Any = None):
        state = ("State and versions", {"fields": list(self.readonly_fields)})
        if not self.has_change_permission(request, obj) and obj is not None:
            return [(None, {"fields": FORM_FIELDS}), state]
        copies = (
            "Approved copy",
            {
                "fields": [f"copy_{purpose}" for purpose in _declared_purposes()],
                "description": "Each reply uses one text; several, separated by a line holding only ---, "
                "are variants chosen by the reply (the same reply always gets the same one).",
            },
        )
        return [(None, {"fields": FORM_FIELDS}), copies, *([state] if obj is not None else [])]

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs):
        # The copy boxes are the form's own (one per declared purpose): not model fields.
        kwargs["fields"] = [f for f in FORM_FIELDS if f not in self.get_readonly_fields(request, obj)]
        return super().get_form(request, obj, change=change, **kwargs)

    def get_changeform_initial_data(self, request: HttpRequest) -> dict:
        initial = super().get_changeform_initial_data(request)
        picked = request.GET.getlist("post")
        if picked:
            initial["posts_text"] = "\n".join(p.strip() for p in picked if p.strip())
        initial.pop("post", None)
        return initial

    # -- saving through the services -----------------------------------------------------------
    def save_model(self, request: HttpRequest, obj: Campaign, form: CampaignForm, change: bool) -> None:
        actor = request.user.get_username()
        rule = form.rule
        if not change:
            made = campaign_create(
                name=obj.name,
                source_id=rule.source.pk,
                every_post=rule.every_post,
                posts=rule.posts,
                keywords=rule.keywords,
                any_comment=rule.any_comment,
                top_level_only=rule.top_level_only,
                starts_at=rule.starts_at,
                ends_at=rule.ends_at,
                copies=form.copies(),
                actor=actor,
            )
            obj.pk = made.pk
            return
        changes = {
            f: getattr(rule, f)
            for f in (
                "every_post",
                "posts",
                "keywords",
                "any_comment",
                "top_level_only",
                "starts_at",
                "ends_at",
            )
        }
        changes["name"] = obj.name
        if not obj.account_default:
            changes["purposes"] = list(form.copies())
        for purpose, texts in form.copies().items():
            campaign_copy_set(campaign_id=obj.pk, purpose=purpose, texts=texts, actor=actor)
        campaign_update(campaign_id=obj.pk, changes=changes, actor=actor)

    def save_related(self, request, form, formsets, change) -> None:
        pass  # a campaign has no related rows the form writes

    # -- state ---------------------------------------------------------------------------------
    def _move(self, request: HttpRequest, queryset, state: str) -> None:
        for campaign in queryset:
            try:
                campaign_state_set(campaign_id=campaign.pk, state=state, actor=request.user.get_username())
                self.message_user(request, f"{campaign.name}: {state}")
            except CampaignRefused as refused:
                self.message_user(request, str(refused), messages.ERROR)

    @admin.action(permissions=["edit"], description="Activate selected campaigns")
    def activate(self, request, queryset):
        self._move(request, queryset, CampaignState.ACTIVE)

    @admin.action(permissions=["edit"], description="Pause selected campaigns")
    def pause(self, request, queryset):
        self._move(request, queryset, CampaignState.PAUSED)

    @admin.action(permissions=["edit"], description="End selected campaigns")
    def end(self, request, queryset):
        self._move(request, queryset, CampaignState.ENDED)

    def change_view(self, request: HttpRequest, object_id: str, form_url: str = "", extra_context=None):
        campaign = Campaign.objects.filter(pk=int(object_id)).first() if object_id.isdigit() else None
        context = {
            "campaign_state_buttons": [
                (verb, label)
                for verb, label in (("activate", "Activate"), ("pause", "Pause"), ("end", "End"))
                if campaign is not None
                and STATE_BUTTONS[verb] in STATE_MOVES[CampaignState(campaign.state)]
                and self.has_edit_permission(request)
            ],
            "campaign_days": selectors.campaign_activity(campaign, days=30) if campaign is not None else [],
            **(extra_context or {}),
        }
        return super().change_view(request, object_id, form_url, context)
