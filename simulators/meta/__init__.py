"""The Graph API simulator: a loopback stand-in for Meta's Graph API, its webhooks and its failures.

It serves the Graph routes Conduit reads and writes with the shapes recorded from Meta
(fixtures/meta_*/recorded/, described in fixtures/meta_recorded_PROVENANCE.md), under both hosts'
route sets on one port, and keeps its state in SQLite so a restart loses nothing:

    Facebook host:  http://127.0.0.1:PORT/vNN.N/...
    Instagram host: http://127.0.0.1:PORT/instagram/vNN.N/...   (Instagram routes only)

    GET  /{ig-user-id}/media?since=&until=            media, newest first, cursor-paged (both hosts)
    GET  /{ig-media-id}/comments?fields=...replies{..} top-level comments, newest first (both)
    GET  /{ig-comment-id}/replies                     replies, newest first      (both hosts)
    GET  /{page-id}/feed|posts?since=&until=          posts, newest first, TIME-paged (Facebook)
    GET  /{post-id}/comments?filter=stream&summary=   every comment, chronological (Facebook)
    GET  /{comment-id}/comments                       replies to a comment, chronological (Facebook)
    GET  /{id}                                        one comment, media, post, conversation or
                                                      message (Instagram objects on both hosts,
                                                      Page and Messenger objects Facebook only)
    GET  /{ig-id}/conversations[?user_id=]            Instagram conversations   (Instagram host)
    GET  /{page-id}/conversations?platform=instagram|messenger[&user_id=]   (Facebook host; instagram:
                                                      the Instagram account linked to the Page)
         -> {"data": [{"id", "updated_time"}], "paging": {"cursors": {"after"}, "next"}}, newest first
    GET  /{conversation-id}?fields=messages[{id,created_time,from,to,message}]
         -> {"messages": {"data": [...], "paging"?}, "id"}, newest first; details only for the 20 newest
    GET  /{message-id}?fields=id,created_time,from,to,message   (an error past the 20 newest)
    GET  /refresh_access_token?grant_type=ig_refresh_token   (Instagram host, no version)
         -> {"access_token", "token_type": "bearer", "expires_in"}: a new token, 60 days from now
    GET  /debug_token?input_token=   {"data": {"is_valid", "expires_at", ...}} (Facebook host)
    POST /{page-id|ig-id}/subscribed_apps  subscribed_fields=a,b   the token's app subscribes -> {"success": true}
    GET  /{page-id|ig-id}/subscribed_apps             {"data": [{"id", "name", "subscribed_fields"}]}
    DELETE /{page-id|ig-id}/subscribed_apps           the app unsubscribed -> {"success": true}
    POST /{ig-comment-id}/replies  message=           public reply -> {"id"}     (both hosts)
    POST /{comment-id}/comments    message=           public reply -> {"id"}     (Facebook)
    POST /{page-id}/messages  {"recipient": {"comment_id"}, "message": {"text", "metadata"?}}
    POST /{ig-id}/messages    (same body)             private reply -> {"recipient_id", "message_id"}
                                                      (Instagram host; on the Facebook host the Page
                                                      node sends and /{ig-id}/messages answers (#3))
    POST /{phone-number-id}/messages  (WhatsApp Cloud API, Facebook host; JSON, or form fields with
                                      JSON-encoded objects) {"messaging_product": "whatsapp",
                                      "recipient_type"?: "individual", "to", "context"?: {"message_id"},
                                      "type": "text", "text": {"body", "preview_url"?} | "type": "template",
                                      "template": {"name", "language": {"code"}, "components"?},
                                      "biz_opaque_callback_data"?}
         -> {"messaging_product", "contacts": [{"input", "wa_id"}], "messages": [{"id": <wamid>,
            "message_status": "accepted" (templates only)}]}; refused, nothing applied, in WhatsApp's
            envelope (`error_data {messaging_product, details}`): a text when the buyer last wrote
            more than 24 hours ago by the simulator's clock, or never (131047); a template not
            registered for the number and language (132001); a bad to/type/body (100); an unknown
            phone number id: Graph's 100/33 "Unsupported post request" (all HTTP 400, as recorded)

Ids have Meta's shapes: Instagram media and comments 17 digits; Instagram message ids (`mid`, the
private reply's `message_id`) are Meta's Z-escaped base64 of `ig_dm_item:1:IGMessageID:<ig-id>:
<thread>:<number>` (about 164 characters, `aWdf...`) and conversation ids of `ig_dm:1:IGMessageThread:
<ig-id>:<thread>` (about 110); Page posts `<page-id>_<digits>`, Page comments `<post-digits>_<digits>`,
Messenger mids `m_` + 86 base64url characters, Messenger conversations `t_<digits>`. A wamid is
`wamid.` + base64 of `1c 18 <len> <number> 15 02 00 <11 out | 12 in> 18 <len> <hex id> 00` (58
characters for an 11-digit number, as recorded).

Paging, as recorded: media and comment edges by cursor (`paging.cursors.{before,after}`, `next`
absent on the last page); `/feed` and `/posts` by time (`paging.previous` carries `since=<newest>`,
`__paging_token` and `__previous=1`, `paging.next` carries `until=<oldest>` and `__paging_token`,
no `cursors`; the token tells apart posts of one second). An account registered with
`"feed_paging": "cursor"` pages its feed by cursor instead (also recorded, Graph v5.0-v10.0).
The conversation endpoints page by `cursors.after` + `next` and leave `paging` out when one page
holds everything. `limit` defaults to 25 (at most 50 on comment edges, 100 on media/feed). Every
error uses Meta's envelope; its keys follow the recordings per code (`is_transient` and
`error_user_*` only where Meta sends them), and on the Instagram host its type is IGApiException.

The control API (never counted as Graph calls):

    POST /_sim/accounts       {"id", "object": "instagram"|"page", "app_id"?, "subscribed_fields"?,
                               "username"?, "name"?, "page_id"?, "feed_paging"?}   register (idempotent)
    POST /_sim/media          {"account", "id"?, "object"?, "media_product_type"?, "created_time"?,
                               "ad_id"?, "caption"? (a Page post's message)} -> {"id"} (minted in
                               Meta's shape without "id"); listed newest first by /media, /posts
    POST /_sim/comments       {"account", "media_id"|"post_id", "text", "from_id", ...} -> {"id"}
    POST /_sim/messages       {"account", "from_id", "to_id"?, "text", "from_name"?, "created_time"?,
                               "notify"} -> {"mid", "conversation_id"}
    POST /_sim/subscriptions  {"account", "app_id", "fields": [...]}   ([] = unsubscribed)
    POST /_sim/tokens         {"token"?, "expires_in"? | "expires_at"?, "issued_at"?, "valid"?, "scopes"?}
                              -> {"token", "expires_at"}: from the first, every Graph call's token
                              must be registered and unexpired (else 190; 190/463 once expired)
    POST /_sim/clock          {"advance_seconds"}: move the simulator's clock (token expiry, refresh)
    POST /_sim/faults         {"mode", "count", "code", "subcode", "status", "message", "user_title",
                               "user_msg", "latency_ms", "retry_minutes", "hang_seconds",
                               "path_contains", "method", "call_count"}
                              ("usage": answer normally with X-Business-Use-Case-Usage at call_count %;
                               code 3 and 200-299 answer Meta's recorded wording unless "message" says)
    DELETE /_sim/faults       clear every pending fault
    GET  /_sim/faults         {"pending": N, "fired": [{"at", "mode", "code", "subcode", "status",
                               "method", "path", "target"}]}  (target: the comment a write concerned)
    GET  /_sim/calls          {"calls": N, "by_path": {...}, "log": [...]};  DELETE resets
    POST /_sim/notify         send every queued notification (batched bodies)
    GET  /_sim/notifications  what was posted to the callback, with the answers
    GET  /_sim/applied        {"public": {comment_id: n}, "private": {comment_id: n}}

    WhatsApp (fixtures/meta_whatsapp/recorded/, its PROVENANCE.md):
    POST /_sim/whatsapp/numbers   {"phone_number_id", "waba_id", "app_id"?, "display_phone_number"?}
                                  register (idempotent); the first time, the app (`app_id`, else the
                                  callback's) is subscribed to the WABA's `messages` (/_sim/subscriptions
                                  with "account": <waba_id> and "fields": [] unsubscribes it)
    POST /_sim/whatsapp/templates {"phone_number_id", "name", "language"? ("en_US"), "category"?
                                  ("utility"|"marketing"|"authentication")}   an approved template
    POST /_sim/whatsapp/messages  {"phone_number_id", "from", "text"?, "type"? ("text"|"interactive"
                                  (a button_reply)|"button"|"image"|"reaction"), "name"?, "timestamp"?,
                                  "context"? (a wamid replied to), "payload"? (button id), "message_id"?
                                  (what a reaction is to), "notify"? (true)} -> {"id": <wamid>}: the
                                  buyer's message, opening the 24-hour window for (number, buyer), and
                                  its webhook (entry id: the WABA; `value` then `field`, as recorded)
    POST /_sim/whatsapp/status_plan {"statuses"? (["sent", "delivered", "read"]; [] none; ["sent"]
                                  when only fail_code is given), "shuffle"?, "duplicate"? (extra copies
                                  of each), "fail_code"? (a `failed` status after `sent`), "seed"?,
                                  "pricing_model"? ("CBP", as recorded; "PMP": v24+, no conversation)}
                                  how later sends' statuses come; DELETE restores the default; GET shows it
    GET  /_sim/whatsapp/sent      {"sent": [{"id", "phone_number_id", "to", "type", "text"|"template",
                                  "context"?, "biz_opaque_callback_data", "at"}], "by_callback_data":
                                  {<reply key>: n}}: every applied send, oldest first

Every applied WhatsApp send (apply_then_* faults included) is reported by one status webhook per
planned status, each its own body, in the plan's order: `sent` with the conversation (and its
expiration) and pricing, `delivered` with both (no expiration), `read` bare, `failed` with `errors`
and, as Meta documents it, without `biz_opaque_callback_data`. Like a Graph write's echoes they are
posted at once from a background thread (the answer does not wait on the receiver), or queued for
/_sim/notify when batching. Faults planted on the send's path answer WhatsApp's envelope for
WhatsApp's codes (130429 with Meta's subcode 2494055, 131056, 131047, ...); the fired log's target
is the send's `biz_opaque_callback_data`, else its `to`.

Its rooms: `server` (HTTP, the control API, `serve`), `routes` (Graph reads and writes as
answers), `paging`, `errors` (Meta's envelope), `shapes` (ids, times, `fields`), and the state
(`state` composes `store`, `content`, `reads`, `writes`, `notifications` and `faults`). WhatsApp's
are `whatsapp` (numbers, templates, buyers' messages, the plan, the control API), `whatsapp_send`,
`whatsapp_statuses`, `whatsapp_errors` and `whatsapp_shapes`.
"""

from simulators.meta.errors import GraphError, not_found
from simulators.meta.server import GraphSimulator, make_handler, serve
from simulators.meta.state import SimulatorState

__all__ = ["GraphError", "GraphSimulator", "SimulatorState", "make_handler", "not_found", "serve"]
