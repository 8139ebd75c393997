"""App configuration for replies."""

from django.apps import AppConfig


def _self_authored_seen(sender, *, source_id: int, items: list[dict], **kwargs) -> None:
    # Evidence ingress saw (an echo, the account's own comment): resolve the unknown sends it shows.
    from replies.evidence import self_authored_resolve

    self_authored_resolve(source_id=source_id, items=items)


def _message_statuses_seen(sender, *, source_id: int, items: list[dict], **kwargs) -> None:
    # Statuses ingress recorded (WhatsApp's): settle the sends they show.
    from replies.statuses import statuses_settle

    statuses_settle(source_id=source_id, items=items)


def _source_connected(sender, *, source_id: int, **kwargs) -> None:
    # An owner connected an account: its purposes get the adapter's default routes.
    from replies.services.routes import reply_routes_default

    reply_routes_default(source_id=source_id)


class RepliesConfig(AppConfig):
    name = "replies"
    verbose_name = "Replies"

    def ready(self) -> None:
        from ingress.signals import message_statuses_seen, self_authored_seen, source_connected

        self_authored_seen.connect(_self_authored_seen, dispatch_uid="replies.self_authored_seen")
        message_statuses_seen.connect(_message_statuses_seen, dispatch_uid="replies.message_statuses_seen")
        source_connected.connect(_source_connected, dispatch_uid="replies.source_connected")

        from ingress.hooks import reply_planner_register, trigger_rules_register
        from replies.services.planning import INGEST_PLANNER, TRIGGER_RULES

        # Ingest plans each new event's replies inside its own transaction (and, on PostgreSQL,
        # its one statement) through the planner replies registers here, after asking the
        # campaigns which one each event matches.
        reply_planner_register(INGEST_PLANNER)
        trigger_rules_register(TRIGGER_RULES)

        from ingress.admin_events import EVENT_CAMPAIGN_NAMES, EVENT_INLINES
        from replies.admin.ledgers import EventReplyActionInline
        from replies.selectors import campaign_name

        EVENT_CAMPAIGN_NAMES[:] = [campaign_name]

        # The event's page in the ingress admin shows its reply actions.
        if EventReplyActionInline not in EVENT_INLINES:
            EVENT_INLINES.append(EventReplyActionInline)
