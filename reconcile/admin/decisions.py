"""Unknown sends in the admin with the replay-decision engine's verdict beside each."""

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from reconcile.admin.words import VERDICT_WORDS
from reconcile.decisions.service import InvalidRequest, decision_make
from reconcile.selectors import reply_decision_request, reply_decision_request_declared, with_decision_inputs
from replies.admin import UnknownSendQueueAdmin
from replies.models import ReplyAction, UnknownSendQueue


# Registered here, once: replies defines the queue's admin but registers it nowhere, since
# its changelist shows reconciliation's replay decision.
@admin.register(UnknownSendQueue)
class UnknownSendDecisionAdmin(UnknownSendQueueAdmin):
    """The unknown-send queue, showing the replay decision before a person decides.

    The changelist only reads: each row's verdict comes from the transport class's declared
    capabilities and the attempts and routes prefetched for the page (a query each, whatever
    the page size), never a transport built or a provider asked. An action's own page shows
    the decision with the capabilities the provider reports.
    """

    lead_fields = ("in_plain_words", *UnknownSendQueueAdmin.lead_fields, "replay_decision")
    list_display = (*UnknownSendQueueAdmin.list_display, "verdict")
    change_form_template = "admin/replies/unknownsendqueue/change_form.html"

    def change_view(self, request, object_id, form_url="", extra_context=None):
        action = self.get_object(request, object_id)  # None for an id that is no row's
        context = {
            "decide_buttons": action is not None
            and action.delivery_state == self.state
            and self.has_resolve_permission(request),
            "changelist_url": reverse("admin:replies_unknownsendqueue_changelist"),
            **(extra_context or {}),
        }
        return super().change_view(request, object_id, form_url, context)

    @admin.display(description="in plain words")
    def in_plain_words(self, obj: ReplyAction):
        """What is known, what the platform can prove, and what each button does: no seed terms."""
        from replies.selectors import action_route
        from replies.transports import transport_for

        route = action_route(obj)
        try:
            caps = transport_for(route).capabilities
            can_look_up, dedupes = caps.receipt_lookup, caps.idempotency_key
        except Exception:  # no route, live sending off, platform unreachable: claim nothing
            can_look_up = dedupes = False
        platform = route.transport_name if route else "the platform"
        tries = "once" if obj.attempt_count == 1 else f"{obj.attempt_count} times"
        known = (
            f"Conduit tried {tries} to send this reply through {platform} and never got a clear answer "
            f"(last: {obj.last_error_code or 'no answer'}). The reply may have reached the customer, or not. "
            "Nothing is sent again until a person decides."
        )
        if can_look_up:
            proof = f"{platform} can be asked whether it holds this reply (by its reply key). " + (
                "It also ignores a second send under the same key, so a retry cannot post twice."
                if dedupes
                else "It does not ignore a second send, so look before any retry."
            )
        else:
            proof = (
                f"{platform} cannot be asked whether it holds this reply. Open the conversation on the "
                "platform and look for the reply yourself before you decide."
            )
        confirm = (
            "You have seen the reply on the platform. Paste the platform's id for that reply (open it "
            "on the platform: its id is in its link or details"
            + ("; or use the lookup button, which finds it for you" if can_look_up else "")
            + "). Conduit records it and marks the reply sent. Nothing is sent."
        )
        retry = (
            "Conduit first asks the platform for the reply: if it is there, the reply is marked sent and "
            "nothing goes out; if it is not, the same reply is sent again under the same key."
            if can_look_up
            else "The platform cannot be asked, so this is refused: check by hand, then Confirm sent or Close."
        )
        close = "Nothing is sent and the reply is closed." + (
            " Conduit asks the platform first and refuses to close a reply the platform already holds."
            if can_look_up
            else " Only do this after checking the conversation by hand."
        )
        rows = [
            ("What is known", known),
            ("What the platform can prove", proof),
            ("Confirm sent", confirm),
            ("Look up, then retry", retry),
            ("Close without reply", close),
        ]
        return format_html(
            '<dl class="conduit-explain">{}</dl>', format_html_join("", "<dt>{}</dt><dd>{}</dd>", rows)
        )

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return with_decision_inputs(super().get_queryset(request))

    @staticmethod
    def _decision(request: dict) -> dict | None:
        try:
            return decision_make(request=request)
        except InvalidRequest:
            return None

    @admin.display(description="replay decision")
    def verdict(self, obj: ReplyAction) -> str:
        """From the transport's declared capabilities; the page asks the provider's."""
        decision = self._decision(reply_decision_request_declared(obj))
        return VERDICT_WORDS.get(decision["verdict"], decision["verdict"]) if decision else "-"

    @admin.display(description="replay decision")
    def replay_decision(self, obj: ReplyAction):
        decision = self._decision(reply_decision_request(obj))
        if decision is None:
            return "no decision: the ledger gave an invalid request"
        questions = format_html_join(
            "",
            "<li>{} {}: {} {}</li>",
            (
                (
                    q["ask"],
                    q["question"],
                    q["status"],
                    f"{q['answer']} ({q['rule']})" if "answer" in q else "",
                )
                for q in decision["questions"]
            ),
        )
        nxt = decision["next"]
        return format_html(
            "<div><strong>{}</strong>: {} <em>({}, for {})</em></div><ul>{}</ul>",
            VERDICT_WORDS.get(decision["verdict"], decision["verdict"]),
            nxt["text"],
            nxt["action"],
            nxt["role"],
            questions,
        )
