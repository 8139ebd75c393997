"""The rules of docs/concepts/replay-decisions.md#clauses: replay.key, replay.snapshot and
replay.delivery. Pure: no ORM, no I/O.

`decide` takes a request that passed the schema and returns the decision
document: a verdict from a closed set, the next action for a named role, and
the evidence questions asked with their answers.
"""

from __future__ import annotations

from typing import Any

from reconcile.decisions.evidence import QUESTION, SETTLING, EvidenceModel

VERDICTS = ("proceed", "existing", "reject", "applied", "retry", "reconcile")
MAY_HAVE_REACHED = ("sent", "response_received")


def _questions(attempts: list[dict], model: EvidenceModel | None) -> list[dict[str, Any]]:
    """destination_outcome@1 for every attempt that may have reached the destination."""
    asked = []
    for index, attempt in enumerate(attempts):
        if attempt["transport"] not in MAY_HAVE_REACHED:
            continue
        question: dict[str, Any] = {"ask": f"attempts/{index}", "question": QUESTION}
        if model is None:
            question["status"] = "model_unavailable"
        else:
            answer = model.answer(QUESTION, attempt)
            if answer is None:
                question["status"] = "abstained"
            else:
                question.update(status="answered", answer=answer.answer, rule=answer.rule)
        question["evidence"] = [f"/attempts/{index}/evidence"] if "evidence" in attempt else []
        asked.append(question)
    return asked


def _next(verdict: str, action: str, text: str, role: str) -> dict[str, Any]:
    return {"verdict": verdict, "next": {"action": action, "text": text, "role": role}}


def decide(request: dict[str, Any], *, role: str, model: EvidenceModel | None) -> dict[str, Any]:
    """The decision for a schema-valid request."""
    proposal = request["proposal"]
    key, digest = proposal["key"], proposal["digest"]
    snapshot = proposal.get("kind") == "snapshot"
    attempts = request.get("attempts", [])
    questions = _questions(attempts, model)

    def done(verdict: str, action: str, text: str) -> dict[str, Any]:
        return {**_next(verdict, action, text, role), "questions": questions}

    # replay.key: one local effect per key; a changed digest under a key is a conflict.
    matches = [event for event in request.get("events", []) if event["key"] == key]
    if any(event["digest"] != digest for event in matches):
        return done(
            "reject",
            "resolve_conflict",
            f"Event key {key} was applied with different content. "
            "A changed digest under the same key is a conflict.",
        )
    if matches:
        return done(
            "existing",
            "return_existing",
            f"Event key {key} was already applied with the same content. "
            "Return the existing effect and change nothing.",
        )

    if proposal["operation"] == "apply":
        # replay.snapshot: a snapshot never posts; it replaces a non-posting position.
        if snapshot:
            return done(
                "proceed",
                "replace_position",
                f"Snapshot {key} replaces the non-posting position at a new revision; "
                "it posts nothing, so it cannot count as a fresh increase.",
            )
        return done("proceed", "post_delta", f"Apply event {key} once: post its delta.")

    # replay.delivery: only transport is retried.
    destination = request.get("destination") or {"name": "the destination", "mode": "event", "dedupe": "none"}
    name = destination["name"]
    noun = "snapshot" if snapshot else "event"
    snapshot_mode = snapshot or destination["mode"] == "snapshot"
    settled = [q.get("answer") for q in questions if q.get("answer") in SETTLING]
    if "applied" in settled:
        if snapshot_mode:
            return done(
                "applied",
                "replace_position",
                f"{name} applied snapshot {key}. Record the replaced position; never resend it.",
            )
        return done("applied", "record_applied", f"{name} applied {noun} {key}. Record it; never resend it.")
    if not attempts:
        return done("proceed", "deliver", f"Deliver {noun} {key} to {name} now.")
    if not questions:
        return done(
            "retry",
            "retry_delivery",
            f"No attempt of {noun} {key} reached {name}. Retry the transport under the same key.",
        )
    if snapshot_mode:
        return done(
            "retry",
            "retry_delivery",
            f"{name} replaces a non-posting position at a monotonic revision, so a transport "
            f"retry of {key} cannot double-count. Retry the transport under the same key.",
        )
    if destination["dedupe"] == "verified":
        return done(
            "retry",
            "retry_delivery",
            f"{name} verifiably deduplicates by key, so a transport retry of {key} cannot "
            "apply it twice. Retry the transport under the same key.",
        )
    if len(settled) == len(questions) and all(answer == "not_applied" for answer in settled):
        return done(
            "retry",
            "retry_delivery",
            f"Every attempt shows {name} did not apply {noun} {key}. Retry the transport under the same key.",
        )
    return done(
        "reconcile",
        "query_destination",
        f"It is not established whether {name} applied {noun} {key}, and it does not "
        "deduplicate. Query it before any retry.",
    )
