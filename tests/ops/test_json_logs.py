"""Structured logs: CONDUIT_LOG_FORMAT=json writes one JSON object per line, the boundary still on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PLANTED_SECRET = "planted-log-value-5e1d0c"
SCRIPT = """
import logging, django
django.setup()
log = logging.getLogger("conduit.planted")
log.info("send action=3 state=SENT code=receipt duration_ms=12")
log.warning("provider said %s", "{planted}")
log.info("ingest code=accepted", extra={{"reply_key": "k1", "payload": '{{"text": "buyer-words-2209"}}'}})
logging.getLogger("django-q").warning("queue code=slow")
""".format(planted=PLANTED_SECRET)


def run_logging(log_format: str | None) -> list[str]:
    env = {
        **os.environ,
        "CONDUIT_PLANTED_SECRET": PLANTED_SECRET,
        "DJANGO_SETTINGS_MODULE": "conduit.settings",
    }
    env.pop("CONDUIT_LOG_FORMAT", None)
    if log_format is not None:
        env["CONDUIT_LOG_FORMAT"] = log_format
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    # django-axes announces itself at start ("AXES: BEGIN ..."): not this test's lines.
    return [line for line in done.stderr.splitlines() if "axes.apps" not in line]


def test_json_mode_writes_one_object_per_line_and_withholds_the_secret():
    lines = run_logging("json")
    records = [json.loads(line) for line in lines]  # every line is one JSON object
    assert len(records) == 4
    first = records[0]
    assert first["message"] == "send action=3 state=SENT code=receipt duration_ms=12"
    assert first["level"] == "INFO" and first["logger"] == "conduit.planted" and first["time"]
    # The boundary filter still on the handler: the secret's record becomes the marker.
    assert records[1]["message"].startswith("[record withheld by the data boundary")
    # An extra field, which only the JSON line prints, is judged too; the line's own fields stay.
    assert records[2]["message"] == "ingest code=accepted" and records[2]["reply_key"] == "k1"
    assert records[2]["payload"] == "[withheld by the data boundary: message body]"
    # django-q2's own logger writes through the same handler.
    assert records[3]["logger"] == "django-q"
    output = "\n".join(lines)
    assert PLANTED_SECRET not in output and "buyer-words-2209" not in output


def test_text_stays_the_default():
    lines = run_logging(None)
    assert len(lines) == 4
    assert lines[0].endswith(" INFO conduit.planted send action=3 state=SENT code=receipt duration_ms=12")
    assert not lines[0].startswith("{")
    assert "[record withheld by the data boundary" in lines[1]
    assert PLANTED_SECRET not in "\n".join(lines)


def test_an_unknown_format_stops_the_process():
    env = {**os.environ, "CONDUIT_LOG_FORMAT": "xml", "DJANGO_SETTINGS_MODULE": "conduit.settings"}
    done = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0 and "CONDUIT_LOG_FORMAT is text or json" in done.stderr


def test_positive_control_a_plain_json_formatter_would_print_the_extra_body():
    import logging

    from pythonjsonlogger.json import JsonFormatter

    from conduit.logging import BoundaryFilter, JsonLineFormatter

    def line(formatter: logging.Formatter) -> str:
        record = logging.LogRecord("conduit.t", logging.INFO, __file__, 1, "ingest code=accepted", (), None)
        record.payload = '{"text": "buyer-words-2209"}'
        BoundaryFilter().filter(record)  # the message is clean: the filter leaves the record be
        return formatter.format(record)

    assert "buyer-words-2209" in line(JsonFormatter())
    assert "buyer-words-2209" not in line(JsonLineFormatter())
