"""The hand-off to the django-q2 send queue, by id."""

from __future__ import annotations


def enqueue_send(action_id: int) -> None:
    """Hand one send to the django-q2 queue, by id."""
    from django_q.tasks import async_task

    async_task("replies.tasks.send_reply", action_id, group="send")
