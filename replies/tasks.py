"""django-q2 tasks: thin, by id; the claim inside reply_send makes redelivery harmless."""

from replies.sender import due_action_ids, enqueue_send, replies_sweep, reply_send
from replies.services import reply_deadline_fill, reply_deadlines_fill, reply_windows_expire


def send_reply(action_id: int) -> str:
    return reply_send(action_id=action_id)


def send_due() -> int:
    """The safety-net schedule: queue every action that is due (approved or backed off)."""
    ids = due_action_ids()
    for action_id in ids:
        enqueue_send(action_id)
    return len(ids)


def sweep_sending() -> int:
    return replies_sweep()


def fill_reply_deadline(action_id: int) -> str:
    """Read a Meta comment's creation time once, after the plan committed (never in the webhook)."""
    deadline = reply_deadline_fill(action_id=action_id)
    return deadline.isoformat() if deadline else "none"


def close_expired_windows() -> int:
    """The window schedule: fill deadlines still unknown, then close what expired while it waited."""
    reply_deadlines_fill()
    return reply_windows_expire()
