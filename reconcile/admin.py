"""Reconciliation in the admin: the replay decision beside each unknown send."""

from django.contrib import admin
from django.utils.html import format_html, format_html_join

from reconcile.decisions.service import InvalidRequest, decision_make
from reconcile.selectors import reply_decision_request
from replies.admin import UnknownSendQueueAdmin
from replies.models import ReplyAction, UnknownSendQueue

admin.site.unregister(UnknownSendQueue)


@admin.register(UnknownSendQueue)
class UnknownSendDecisionAdmin(UnknownSendQueueAdmin):
    """The unknown-send queue, showing the replay decision before a person decides."""

    fields = readonly_fields = (*UnknownSendQueueAdmin.fields, "replay_decision")
    list_display = (*UnknownSendQueueAdmin.list_display, "verdict")

    @staticmethod
    def _decision(obj: ReplyAction) -> dict | None:
        try:
            return decision_make(request=reply_decision_request(obj))
        except InvalidRequest:
            return None

    @admin.display(description="decision")
    def verdict(self, obj: ReplyAction) -> str:
        decision = self._decision(obj)
        return f"{decision['verdict']}: {decision['next']['action']}" if decision else "-"

    @admin.display(description="replay decision")
    def replay_decision(self, obj: ReplyAction):
        decision = self._decision(obj)
        if decision is None:
            return "no decision: the ledger gave an invalid request"
        questions = format_html_join(
            "", "<li>{} {}: {} {}</li>",
            (
                (q["ask"], q["question"], q["status"],
                 f"{q['answer']} ({q['rule']})" if "answer" in q else "")
                for q in decision["questions"]
            ),
        )
        nxt = decision["next"]
        return format_html(
            "<div><strong>{}</strong>: {} <em>({}, for {})</em></div><ul>{}</ul>",
            decision["verdict"], nxt["text"], nxt["action"], nxt["role"], questions,
        )
