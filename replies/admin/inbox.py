"""The reviewer's inbox in the admin: one card per comment, decided by button or by keyboard.

Served by the review queue's admin at `inbox/` (`admin:replies_inbox`): the same permission
reads it, the same actions decide (approve with the text pinned, close with a reason), and the
same confirmation page shows every text that will go out beside the comment it answers.
"""

from __future__ import annotations

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.http import urlencode

from conduit.search import may_search_words
from replies import inbox
from replies.models import DeliveryState, ReplyAction
from replies.posts import recent_posts

CARDS_PER_PAGE = 20

# Why a reviewer closes a comment without reply: the code is kept in the reply's history.
CLOSE_REASONS = (
    ("closed_not_a_buyer", "Not a buyer's question (spam, a joke, a tag)"),
    ("closed_answered_elsewhere", "Already answered elsewhere"),
    ("closed_copy_does_not_fit", "The reply's text does not answer what they asked"),
    ("closed_by_reviewer", "Another reason"),
)


def numbers(values: list[str]) -> list[int]:
    """The posted values that are row ids; anything else (a word, "²") is no row's."""
    return [int(v) for v in values if v.isascii() and v.isdecimal()]


class InboxViews:
    """Mixed into the review queue's admin (replies.admin.queues.ReviewQueueAdmin)."""

    def get_urls(self):
        own = [path("inbox/", self.admin_site.admin_view(self.inbox_view), name="replies_inbox")]
        return own + super().get_urls()

    def inbox_url(self, request: HttpRequest) -> str:
        term = request.POST.get("q") or request.GET.get("q") or ""
        return reverse("admin:replies_inbox") + (f"?{urlencode({'q': term})}" if term else "")

    def inbox_view(self, request: HttpRequest) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        if request.method == "POST":
            return self._inbox_decide(request)
        term = request.GET.get("q", "").strip()
        content = may_search_words(request.user)
        after = request.GET.get("after", "")
        page = inbox.waiting_page(
            term=term, words=content, after=(numbers([after]) or [0])[0], size=CARDS_PER_PAGE
        )
        context = {
            **self.admin_site.each_context(request),
            "title": "Inbox: comments waiting for a reply",
            "opts": self.model._meta,
            "cards": inbox.cards(page.event_keys),
            "first_page": not numbers([after]) or after == "0",
            "page": page,
            "q": term,
            "show_content": content,
            "can_decide": self.has_approve_permission(request),
            "checkbox": admin.helpers.ACTION_CHECKBOX_NAME,
            "queue_url": reverse("admin:replies_reviewqueue_changelist"),
        }
        return TemplateResponse(request, "admin/replies/inbox.html", context)

    def _inbox_decide(self, request: HttpRequest) -> HttpResponse:
        if not self.has_approve_permission(request):
            raise PermissionDenied
        verb = request.POST.get("action", "")
        if verb == "read_posts":
            return self._read_posts(request)
        ids = set(numbers(request.POST.getlist(admin.helpers.ACTION_CHECKBOX_NAME)))
        cards = numbers(request.POST.getlist("card"))
        if cards:
            ids |= set(
                ReplyAction.objects.filter(
                    event__pk__in=cards, delivery_state=DeliveryState.REVIEW_PENDING
                ).values_list("pk", flat=True)
            )
        queryset = (
            self.get_queryset(request)
            .filter(pk__in=ids)
            .select_related("event__source", "campaign")
            .order_by("event_id", "purpose")
        )
        if not queryset.exists():
            self.message_user(request, "Nothing selected is waiting for review.", messages.WARNING)
            return HttpResponseRedirect(self.inbox_url(request))
        if verb == "approve":
            response = self.approve(request, queryset)
        elif verb == "close":
            response = self.close_with_reason(request, queryset)
        else:
            self.message_user(request, f"Unknown action {verb!r}.", messages.ERROR)
            response = None
        return response or HttpResponseRedirect(self.inbox_url(request))

    def _read_posts(self, request: HttpRequest) -> HttpResponse:
        """Read each source's recent posts from its platform, for the cards' captions and pictures."""
        from ingress.models import Source

        for source in Source.objects.filter(pk__in=numbers(request.POST.getlist("source"))).order_by("name"):
            posts, why = recent_posts(source)
            if why:
                self.message_user(request, why, messages.WARNING)
            else:
                self.message_user(
                    request, f"{source.name}: {len(posts)} recent posts read.", messages.SUCCESS
                )
        return HttpResponseRedirect(self.inbox_url(request))
