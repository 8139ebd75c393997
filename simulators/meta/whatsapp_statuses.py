"""The statuses a WhatsApp send is reported by: the plan (`/_sim/whatsapp/status_plan`), the order
it makes, and each status's object as Meta's Status reference and the recordings show it."""

from __future__ import annotations

import random

from simulators.meta.whatsapp_errors import status_error
from simulators.meta.whatsapp_shapes import status_item

STATUSES = ("sent", "delivered", "read")
PRICING_MODELS = ("CBP", "PMP")
DEFAULT_PLAN = {
    "statuses": list(STATUSES),
    "shuffle": False,
    "duplicate": 0,
    "fail_code": None,
    "seed": None,
    "pricing_model": "CBP",
}
MAX_DUPLICATES = 10
# Seconds after the send each status is stamped with (its `timestamp`, whatever order it comes in).
STAMP_AFTER = {"sent": 0, "failed": 1, "delivered": 1, "read": 2}


def plan_parse(data: dict) -> dict:
    """A plan from a control body: statuses among sent/delivered/read ([] sends none; ["sent"]
    when only `fail_code` is given), `shuffle`, `duplicate` (extra copies of each), `fail_code`
    (a `failed` status after `sent`), `seed`, `pricing_model` (CBP, or PMP as v24+ sends it)."""
    fail = data.get("fail_code")
    if fail is not None and (isinstance(fail, bool) or not isinstance(fail, int)):
        raise ValueError("fail_code is a WhatsApp error code (a number) or null")
    statuses = data.get("statuses")
    if statuses is None:
        statuses = ["sent"] if fail is not None else list(STATUSES)
    if not isinstance(statuses, list) or any(s not in STATUSES for s in statuses):
        raise ValueError(f"statuses is a list of {STATUSES} (failed comes from fail_code)")
    duplicate = int(data.get("duplicate") or 0)
    if not 0 <= duplicate <= MAX_DUPLICATES:
        raise ValueError(f"duplicate is 0 to {MAX_DUPLICATES} extra copies of each status")
    model = str(data.get("pricing_model") or "CBP")
    if model not in PRICING_MODELS:
        raise ValueError(f"pricing_model is one of {PRICING_MODELS}")
    seed = data.get("seed")
    return {
        "statuses": list(statuses),
        "shuffle": bool(data.get("shuffle", False)),
        "duplicate": duplicate,
        "fail_code": fail,
        "seed": None if seed is None else str(seed),
        "pricing_model": model,
    }


def plan_sequence(plan: dict, rng: random.Random) -> list[str]:
    """The statuses one send is reported by, in the order they are posted. Shuffled, the order
    always differs from the plan's when it can (a test asked for disorder, not for chance)."""
    order = list(plan["statuses"])
    if plan["fail_code"] is not None:
        order.insert(order.index("sent") + 1 if "sent" in order else 0, "failed")
    order = [status for status in order for _ in range(1 + plan["duplicate"])]
    if plan["shuffle"] and len(set(order)) > 1:
        shuffled = list(order)
        for _ in range(10):
            rng.shuffle(shuffled)
            if shuffled != order:
                break
        else:
            shuffled = order[::-1]
        order = shuffled
    return order


def plan_rng(plan: dict, seq: int) -> random.Random:
    """Seeded: the n-th send after a plan is set is shuffled alike on every run."""
    return random.Random() if plan["seed"] is None else random.Random(f"{plan['seed']}:{seq}")


def send_statuses(
    plan: dict,
    order: list[str],
    *,
    id: str,
    recipient: str,
    callback_data: str | None,
    sent_at: int,
    category: str,
    free: bool,
    conversation: dict,
) -> list[dict]:
    """Each status of `order` as Meta posts it. CBP (as recorded): `sent` carries the conversation
    with its expiration and the pricing, `delivered` both without the expiration, `read` neither.
    PMP (v24+): no conversation; pricing (with `type`) on `sent` and `delivered`. A failure carries
    `errors` and no `biz_opaque_callback_data` (Meta returns it on sent/delivered/read only)."""
    cbp = plan["pricing_model"] == "CBP"
    items = []
    for status in order:
        conv = pricing = error = None
        if status in ("sent", "delivered"):
            if cbp:
                conv = {"id": conversation["id"]}
                if status == "sent":
                    conv["expiration_timestamp"] = str(int(conversation["expires"]))
                conv["origin"] = {"type": category}
                pricing = {"billable": True, "pricing_model": "CBP", "category": category}
            else:
                pricing = {
                    "billable": not free,
                    "pricing_model": "PMP",
                    "category": category,
                    "type": "free_customer_service" if free else "regular",
                }
        if status == "failed":
            error = status_error(plan["fail_code"])
        items.append(
            status_item(
                status=status,
                id=id,
                timestamp=sent_at + STAMP_AFTER[status],
                recipient=recipient,
                callback_data=None if status == "failed" else callback_data,
                conversation=conv,
                pricing=pricing,
                error=error,
            )
        )
    return items
