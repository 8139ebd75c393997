"""A campaign's own pages in the admin, mixed into its ModelAdmin (replies.admin.campaigns):

<id>/preview/    GET: the last recorded comments in its scope, matched or not and why
<id>/catch-up/   GET: how many earlier comments it would plan replies for; POST: plan them
<id>/activity/   GET: what it did per day (?format=json: the same as JSON)
<id>/state/      POST: activate, pause or end it (then the catch-up, when it has one to offer)
posts/           GET: the account's recent posts from the platform, to pick from by what they are
"""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponseRedirect, JsonResponse
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.views.decorators.http import require_POST

from ingress.models import Source
from replies import selectors
from replies.matching import campaign_preview
from replies.models import Campaign, CampaignState
from replies.services import CampaignRefused, campaign_state_set
from replies.services.catch_up import campaign_catch_up

STATE_BUTTONS = {"activate": CampaignState.ACTIVE, "pause": CampaignState.PAUSED, "end": CampaignState.ENDED}


class CampaignPages:
    """The pages beside a campaign's change form; the ModelAdmin gives has_view_permission and
    has_edit_permission."""

    def get_urls(self):
        wrap = self.admin_site.admin_view
        return [
            path("posts/", wrap(self.posts_view), name="replies_campaign_posts"),
            path("<int:pk>/preview/", wrap(self.preview_view), name="replies_campaign_preview"),
            path("<int:pk>/catch-up/", wrap(self.catch_up_view), name="replies_campaign_catch_up"),
            path("<int:pk>/activity/", wrap(self.activity_view), name="replies_campaign_activity"),
            path("<int:pk>/state/", wrap(require_POST(self.state_view)), name="replies_campaign_state"),
            *super().get_urls(),
        ]

    def _page(self, request: HttpRequest, template: str, title: str, **context) -> TemplateResponse:
        return TemplateResponse(
            request,
            f"admin/replies/campaign/{template}",
            {**self.admin_site.each_context(request), "opts": self.model._meta, "title": title, **context},
        )

    def _viewable(self, request: HttpRequest, pk: int) -> Campaign:
        if not self.has_view_permission(request):
            raise PermissionDenied
        return get_object_or_404(Campaign.objects.select_related("source"), pk=pk)

    def state_view(self, request: HttpRequest, pk: int):
        if not self.has_edit_permission(request):
            raise PermissionDenied
        campaign = get_object_or_404(Campaign, pk=pk)
        verb = request.POST.get("verb", "")
        if verb not in STATE_BUTTONS:
            self.message_user(request, f"no such move {verb!r}", messages.ERROR)
        else:
            try:
                campaign = campaign_state_set(
                    campaign_id=pk, state=STATE_BUTTONS[verb], actor=request.user.get_username()
                )
                self.message_user(request, f"{campaign.name}: {campaign.state}")
            except CampaignRefused as refused:
                self.message_user(request, str(refused), messages.ERROR)
                return HttpResponseRedirect(reverse("admin:replies_campaign_change", args=[pk]))
        if campaign.state == CampaignState.ACTIVE:
            try:
                offer = campaign_catch_up(campaign_id=pk, actor=request.user.get_username())
            except CampaignRefused:
                offer = None  # nothing to offer (no purpose it answers with can answer a comment)
            if offer is not None and offer.comments:
                return HttpResponseRedirect(reverse("admin:replies_campaign_catch_up", args=[pk]))
        return HttpResponseRedirect(reverse("admin:replies_campaign_change", args=[pk]))

    def preview_view(self, request: HttpRequest, pk: int):
        campaign = self._viewable(request, pk)
        try:
            last = max(1, min(int(request.GET.get("last", 20)), 200))
        except ValueError:
            last = 20
        rows = campaign_preview(campaign_id=pk, last=last)
        texts = {}
        if request.user.has_perm("ingress.view_message_content"):
            from ingress.models import InboundEvent

            texts = dict(
                InboundEvent.objects.filter(event_key__in=[r.event_key for r in rows]).values_list(
                    "event_key", "message_text"
                )
            )
        return self._page(
            request,
            "preview.html",
            f"Would match: {campaign.name}",
            campaign=campaign,
            rows=[(row, texts.get(row.event_key)) for row in rows],
            last=last,
            show_text=bool(texts) or request.user.has_perm("ingress.view_message_content"),
        )

    def catch_up_view(self, request: HttpRequest, pk: int):
        campaign = self._viewable(request, pk)
        include = request.POST.get("include_history") == "on" or request.GET.get("include_history") == "on"
        actor = request.user.get_username()
        try:
            if request.method == "POST":
                if not self.has_edit_permission(request):
                    raise PermissionDenied
                done = campaign_catch_up(campaign_id=pk, actor=actor, include_history=include, plan=True)
                self.message_user(
                    request,
                    f"planned {done.replies} replies for {done.comments} earlier comments: they wait for review "
                    "in the review queue",
                )
                return HttpResponseRedirect(reverse("admin:replies_campaign_change", args=[pk]))
            offer = campaign_catch_up(campaign_id=pk, actor=actor, include_history=include)
        except CampaignRefused as refused:
            self.message_user(request, str(refused), messages.ERROR)
            return HttpResponseRedirect(reverse("admin:replies_campaign_change", args=[pk]))
        return self._page(
            request,
            "catch_up.html",
            f"Catch up: {campaign.name}",
            campaign=campaign,
            offer=offer,
            include_history=include,
            can_plan=self.has_edit_permission(request),
        )

    def activity_view(self, request: HttpRequest, pk: int):
        campaign = self._viewable(request, pk)
        try:
            span = max(1, min(int(request.GET.get("days", 30)), 400))
        except ValueError:
            span = 30
        days = selectors.campaign_activity(campaign, days=span)
        if request.GET.get("format") == "json":
            return JsonResponse(
                {
                    "campaign": campaign.name,
                    "source": campaign.source.name,
                    "state": campaign.state,
                    "version": campaign.version,
                    "span_days": span,
                    "days": days,
                    "note": "processing states only: no buyers, revenue or intent are claimed",
                }
            )
        return self._page(
            request, "activity.html", f"What {campaign.name} did", campaign=campaign, days=days, span=span
        )

    def posts_view(self, request: HttpRequest):
        if not self.has_edit_permission(request):
            raise PermissionDenied
        from replies.posts import recent_posts

        sources = Source.objects.order_by("name")
        picked = request.GET.get("source", "")
        source = sources.filter(pk=int(picked)).first() if picked.isdigit() else None
        posts, problem = recent_posts(source) if source is not None else ([], "")
        return self._page(
            request,
            "posts.html",
            "Pick the posts a campaign covers",
            sources=sources,
            source=source,
            posts=posts,
            problem=problem,
        )
