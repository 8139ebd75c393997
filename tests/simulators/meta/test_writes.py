"""Writes: public and private replies with Meta's answers, limits, echoes and apply_then_* faults."""

from __future__ import annotations

import http.client
import json
import time
import urllib.error

import pytest

from tests.simulators.meta.helpers import APP_ID, IG, PAGE, add_comment, call, wait_for

DAY = 24 * 3600


def fault(sim, **data) -> None:
    assert call(f"{sim.root}/_sim/faults", method="POST", body=data)[0] == 200


def applied(sim) -> dict:
    return call(f"{sim.root}/_sim/applied")[1]


def private(sim, base: str, node: str, comment: str, text: str = "Here is the link", **message):
    return call(
        f"{base}/{node}/messages",
        method="POST",
        body={"recipient": {"comment_id": comment}, "message": {"text": text, **message}},
    )


def test_instagram_public_reply_lands_on_the_top_level_and_is_readable(sim):
    top = add_comment(sim, account=IG, media_id="m_w", text="Hi", from_id="u1")
    nested = add_comment(sim, account=IG, media_id="m_w", text="me too", from_id="u2", parent_id=top)
    status, answer, _ = call(
        f"{sim.instagram_url}/{nested}/replies", method="POST", params={"message": "Thanks!"}
    )
    assert status == 200 and set(answer) == {"id"}
    replies = call(f"{sim.url}/{top}/replies", params={"fields": "id,text,from{id,username},parent_id"})[1][
        "data"
    ]
    mine = next(r for r in replies if r["id"] == answer["id"])
    assert mine["from"]["id"] == IG and mine["parent_id"] == top and mine["text"] == "Thanks!"
    assert applied(sim) == {"public": {nested: 1}, "private": {}}


def test_facebook_public_reply_is_a_comment_on_the_comment(sim):
    top = add_comment(sim, account=PAGE, post_id=f"{PAGE}_9", text="Q", from_id="u1")
    status, answer, _ = call(f"{sim.url}/{top}/comments", method="POST", body={"message": "A"})
    assert status == 200 and set(answer) == {"id"}
    stream = call(
        f"{sim.url}/{PAGE}_9/comments",
        params={"filter": "stream", "fields": "id,message,from{id,name},parent{id}"},
    )[1]["data"]
    assert stream[-1] == {
        "id": answer["id"],
        "message": "A",
        "from": {"id": PAGE, "name": f"acct_test_{PAGE}"},
        "parent": {"id": top},
    }
    # Facebook comment routes are not on the Instagram host.
    assert call(f"{sim.instagram_url}/{top}/comments", method="POST", body={"message": "A"})[0] == 400


def test_private_reply_answers_meta_shape_and_only_once_per_comment(sim):
    comment = add_comment(sim, account=IG, media_id="m_p", text="LINK", from_id="u7")
    status, answer, _ = private(sim, sim.instagram_url, IG, comment)
    assert status == 200 and answer["recipient_id"] == "u7" and answer["message_id"]
    status, answer, _ = private(sim, sim.instagram_url, IG, comment)
    assert status == 400
    assert answer["error"]["code"] == 10900 and "Activity already replied to" in answer["error"]["message"]
    assert applied(sim) == {"public": {}, "private": {comment: 1}}


def test_the_seven_day_window_per_platform(sim):
    old_ig = add_comment(
        sim, account=IG, media_id="m_old", text="x", from_id="u1", created_time=time.time() - 8 * DAY
    )
    old_fb = add_comment(
        sim, account=PAGE, post_id=f"{PAGE}_3", text="x", from_id="u1", created_time=time.time() - 8 * DAY
    )
    edge_fb = add_comment(
        sim,
        account=PAGE,
        post_id=f"{PAGE}_3",
        text="x",
        from_id="u2",
        created_time=time.time() - 7 * DAY + 60,
    )
    error = private(sim, sim.instagram_url, IG, old_ig)[1]["error"]
    assert (error["code"], error["error_subcode"]) == (10, 2534022)
    error = private(sim, sim.url, PAGE, old_fb)[1]["error"]
    assert (error["code"], error["error_subcode"]) == (10, 2018278)
    assert private(sim, sim.url, PAGE, edge_fb)[0] == 200  # one minute inside the window
    assert applied(sim)["private"] == {edge_fb: 1}


def test_the_pages_own_comment_cannot_be_replied_to_privately(sim):
    top = add_comment(sim, account=PAGE, post_id=f"{PAGE}_4", text="Q", from_id="u1")
    own = add_comment(sim, account=PAGE, post_id=f"{PAGE}_4", text="A", from_id=PAGE, parent_id=top)
    read = call(f"{sim.url}/{own}", params={"fields": "can_reply_privately"})[1]
    assert read == {"id": own, "can_reply_privately": False}
    assert (
        call(f"{sim.url}/{top}", params={"fields": "can_reply_privately"})[1]["can_reply_privately"] is True
    )
    status, answer, _ = private(sim, sim.url, PAGE, own)
    assert status == 400 and (answer["error"]["code"], answer["error"]["error_subcode"]) == (100, 2534025)


def test_instagram_through_the_page_token_uses_the_linked_page(sim):
    call(f"{sim.root}/_sim/accounts", method="POST", body={"id": PAGE, "object": "page"})
    call(f"{sim.root}/_sim/accounts", method="POST", body={"id": IG, "object": "instagram", "page_id": PAGE})
    comment = add_comment(sim, account=IG, media_id="m_l", text="x", from_id="u1")
    assert private(sim, sim.url, PAGE, comment)[0] == 200
    other = add_comment(sim, account="17841400000000009", media_id="m_o", text="x", from_id="u1")
    assert private(sim, sim.url, PAGE, other)[0] == 400  # not this Page's Instagram account


def test_messenger_echo_carries_metadata_and_app_id(notifying_sim, receiver):
    comment = add_comment(notifying_sim, account=PAGE, post_id=f"{PAGE}_6", text="x", from_id="u5")
    status, answer, _ = private(notifying_sim, notifying_sim.url, PAGE, comment, metadata="rk_test_01")
    assert status == 200
    body = json.loads(wait_for(receiver, 1)[-1][0])
    message = body["entry"][0]["messaging"][0]["message"]
    assert body["object"] == "page"
    assert message == {
        "mid": answer["message_id"],
        "text": "Here is the link",
        "is_echo": True,
        "app_id": APP_ID,
        "metadata": "rk_test_01",
    }
    assert body["entry"][0]["messaging"][0]["recipient"] == {"id": "u5"}


def test_instagram_echo_arrives_in_messages_without_metadata(notifying_sim, receiver):
    """Declared assumption: Instagram echoes do not carry metadata (Meta documents none)."""
    comment = add_comment(notifying_sim, account=IG, media_id="m_e", text="x", from_id="u5")
    status, answer, _ = private(
        notifying_sim, notifying_sim.instagram_url, IG, comment, metadata="rk_test_02"
    )
    message = json.loads(wait_for(receiver, 1)[-1][0])["entry"][0]["messaging"][0]["message"]
    assert message == {"mid": answer["message_id"], "text": "Here is the link", "is_echo": True}


def test_a_public_reply_is_notified_as_a_self_authored_comment(notifying_sim, receiver):
    top = add_comment(notifying_sim, account=IG, media_id="m_e", text="x", from_id="u5")
    new = call(f"{notifying_sim.url}/{top}/replies", method="POST", params={"message": "ok"})[1]["id"]
    value = json.loads(wait_for(receiver, 1)[-1][0])["entry"][0]["changes"][0]["value"]
    assert (value["id"], value["from"]["id"], value["parent_id"]) == (new, IG, top)


def test_apply_then_error_applies_and_answers_the_error(sim):
    comment = add_comment(sim, account=IG, media_id="m_a", text="x", from_id="u1")
    fault(sim, mode="apply_then_error", code=20, subcode=1772107, status=400)
    status, answer, _ = call(f"{sim.url}/{comment}/replies", method="POST", params={"message": "hi"})
    assert status == 400 and (answer["error"]["code"], answer["error"]["error_subcode"]) == (20, 1772107)
    assert applied(sim)["public"] == {comment: 1}


def test_apply_then_timeout_applies_and_never_answers_in_time(sim):
    comment = add_comment(sim, account=IG, media_id="m_a", text="x", from_id="u1")
    fault(sim, mode="apply_then_timeout", hang_seconds=3)
    with pytest.raises((TimeoutError, urllib.error.URLError)):
        call(
            f"{sim.instagram_url}/{IG}/messages",
            method="POST",
            timeout=0.5,
            body={"recipient": {"comment_id": comment}, "message": {"text": "hi"}},
        )
    assert applied(sim)["private"] == {comment: 1}


def test_apply_then_drop_applies_and_closes_the_connection(sim):
    comment = add_comment(sim, account=PAGE, post_id=f"{PAGE}_2", text="x", from_id="u1")
    fault(sim, mode="apply_then_drop")
    connection = http.client.HTTPConnection("127.0.0.1", sim.port, timeout=5)
    connection.request("POST", f"/v26.0/{comment}/comments?access_token=tok&message=hi")
    with pytest.raises(http.client.RemoteDisconnected):
        connection.getresponse()
    connection.close()
    assert applied(sim)["public"] == {comment: 1}


def test_error_on_a_write_applies_nothing(sim):
    """Positive control for apply_then_*: the plain error mode refuses before applying."""
    comment = add_comment(sim, account=IG, media_id="m_a", text="x", from_id="u1")
    fault(sim, mode="error", code=80002, method="POST")
    assert call(f"{sim.url}/{comment}/replies", method="POST", params={"message": "hi"})[0] == 400
    assert applied(sim) == {"public": {}, "private": {}}


def test_apply_then_modes_leave_reads_alone(sim):
    comment = add_comment(sim, account=IG, media_id="m_a", text="x", from_id="u1")
    fault(sim, mode="apply_then_error", code=2)
    assert call(f"{sim.url}/m_a/comments")[0] == 200  # the fault waits for a write
    assert call(f"{sim.url}/{comment}/replies", method="POST", params={"message": "hi"})[0] == 500


def test_the_reply_answer_does_not_wait_for_a_slow_receiver(notifying_sim, receiver):
    """The echo goes out beside the answer: a receiver waiting on the sender cannot deadlock it."""
    comment = add_comment(notifying_sim, account=PAGE, post_id=f"{PAGE}_8", text="x", from_id="u5")
    receiver.delay = 2
    started = time.monotonic()
    assert private(notifying_sim, notifying_sim.url, PAGE, comment)[0] == 200
    assert time.monotonic() - started < 1
    assert json.loads(wait_for(receiver, 1)[-1][0])["entry"][0]["messaging"][0]["message"]["is_echo"] is True


def test_a_page_comment_shows_its_private_reply_conversation_once_one_was_applied(sim):
    """Read-back: "on Facebook `private_reply_conversation` gives the conversation of a private
    reply"; one per comment, so `can_reply_privately` turns false after it."""
    comment = add_comment(sim, account=PAGE, post_id=f"{PAGE}_21", text="LINK", from_id="u21")
    fields = {"fields": "id,private_reply_conversation,can_reply_privately"}
    before = call(f"{sim.url}/{comment}", params=fields)[1]
    assert before == {"id": comment, "can_reply_privately": True}  # Graph omits a field with no value
    assert private(sim, sim.url, PAGE, comment)[0] == 200
    after = call(f"{sim.url}/{comment}", params=fields)[1]
    assert after["can_reply_privately"] is False
    assert set(after["private_reply_conversation"]) == {"id"} and after["private_reply_conversation"][
        "id"
    ].startswith("t_")
    other = add_comment(sim, account=PAGE, post_id=f"{PAGE}_21", text="LINK", from_id="u22")
    assert "private_reply_conversation" not in call(f"{sim.url}/{other}", params=fields)[1]


def test_the_fault_log_names_the_comment_each_fired_write_concerned(sim):
    public = add_comment(sim, account=IG, media_id="m_fl", text="x", from_id="u1")
    secret = add_comment(sim, account=IG, media_id="m_fl", text="y", from_id="u2")
    fault(sim, mode="error", code=80002, method="POST", count=2)
    call(f"{sim.instagram_url}/{public}/replies", method="POST", params={"message": "hi"})
    call(
        f"{sim.instagram_url}/{IG}/messages",
        method="POST",
        params={"recipient": json.dumps({"comment_id": secret}), "message": json.dumps({"text": "hi"})},
    )
    fired = call(f"{sim.root}/_sim/faults")[1]
    assert fired["pending"] == 0
    assert [(f["mode"], f["code"], f["target"]) for f in fired["fired"]] == [
        ("error", 80002, public),
        ("error", 80002, secret),
    ]
