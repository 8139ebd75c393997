"""Helpers for the Meta transport tests: transports on the simulator, replies, control calls, the loopback guard."""

from __future__ import annotations

import hashlib
import json
import socket
import urllib.request

from conduit.loopback import LOOPBACK_HOSTS
from conduit.providers.base import OutboundReply
from conduit.providers.meta.transport import (
    MetaCommentReplyTransport,
    MetaPrivateReplyTransport,
)

IG = "17841400000000001"
PAGE = "100000000000001"
TOKEN = "EAAtestonlytoken0000000000000000"  # synthetic: it opens nothing
APP_ID = "app_test_1001"
APP_SECRET = "meta-transport-test-only-secret-01"  # test-only: it signs nothing real
# The transports' timeout; the simulator holds a timeout fault longer than this.
TIMEOUT = 1.0
HANG = 3.0

# (transport class, object): every combination the tests drive.
KINDS = {
    "public-instagram": (MetaCommentReplyTransport, "instagram"),
    "public-page": (MetaCommentReplyTransport, "page"),
    "private-instagram": (MetaPrivateReplyTransport, "instagram"),
    "private-page": (MetaPrivateReplyTransport, "page"),
}


def transport(sim, kind: str, *, token: str = TOKEN):
    cls, object = KINDS[kind]
    url = sim.instagram_url if object == "instagram" else sim.url
    account = IG if object == "instagram" else PAGE
    return cls(url, timeout=TIMEOUT, token=token, account_ref=account, object=object)


def control(sim, name: str, body: dict | None = None, *, method: str | None = None) -> dict:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        f"{sim.root}/_sim/{name}",
        data=data,
        method=method or ("POST" if data else "GET"),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        return json.loads(response.read())


def comment(
    sim,
    object: str,
    *,
    from_id: str = "user_test_7",
    parent_id: str | None = None,
    created_time: float | None = None,
    media: str = "1",
) -> str:
    data: dict = {"text": "LINK please", "from_id": from_id, "notify": False}
    if object == "instagram":
        data.update(account=IG, media_id=f"1790000000000{media}")
    else:
        data.update(account=PAGE, post_id=f"{PAGE}_{media}")
    if parent_id:
        data["parent_id"] = parent_id
    if created_time is not None:
        data["created_time"] = created_time
    return control(sim, "comments", data)["id"]


def reply_for(
    comment_id: str,
    *,
    purpose: str = "public_ack",
    text: str = "Thanks, the checklist is on its way",
    event: str = "evt_test_0042",
) -> OutboundReply:
    event_key = f"meta-test:acct_test_01:comment.created:{event}"
    reply_key = hashlib.sha256(f"reply|{event_key}|{purpose}".encode()).hexdigest()
    return OutboundReply(
        reply_key=reply_key,
        event_key=event_key,
        purpose=purpose,
        channel="comment",
        copy_version="copy_test_v1",
        text=text,
        conversation_ref="post_test_07",
        message_ref=comment_id,
    )


def applied(sim, *targets: str) -> dict:
    """/_sim/applied, narrowed to `targets` when given (the simulator is shared by a module's tests)."""
    answer = control(sim, "applied")
    if not targets:
        return answer
    return {kind: {c: n for c, n in counts.items() if c in targets} for kind, counts in answer.items()}


def fault(sim, **data) -> None:
    control(sim, "faults", data)


def outside_hosts(attempted: list[str]) -> list[str]:
    return [host for host in attempted if host not in LOOPBACK_HOSTS]


def loopback_guard(attempted: list[str], real=socket.create_connection):
    """A socket.create_connection that records every address and refuses any off this host
    (before DNS: http.client resolves inside create_connection)."""

    def guarded(address, *args, **kwargs):
        attempted.append(str(address[0]))
        if str(address[0]) not in LOOPBACK_HOSTS:
            raise ConnectionRefusedError("the meta_transport tests connect only to this host")
        return real(address, *args, **kwargs)

    return guarded
