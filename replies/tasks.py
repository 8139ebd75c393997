"""django-q2 tasks: thin, by id; the claim inside reply_send makes redelivery harmless."""

from replies.sender import due_action_ids, enqueue_send, replies_sweep, reply_send


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
