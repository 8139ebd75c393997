"""The back office's own door: check --deploy clean behind TLS, a TOTP second factor, throttled sign-in."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.test import override_settings

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "door-test-password-51"


def check_deploy(**extra_env: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "SECRET_KEY": secrets.token_urlsafe(50), "DEBUG": "false", **extra_env}
    for name in ("CONDUIT_BEHIND_TLS_PROXY", "CONDUIT_HSTS_SECONDS"):
        if name not in extra_env:
            env.pop(name, None)
    # --fail-level WARNING: any warning at all makes the exit status non-zero.
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_check_deploy_passes_with_no_warning_behind_the_tls_proxy():
    done = check_deploy(CONDUIT_BEHIND_TLS_PROXY="on")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "System check identified no issues (0 silenced)." in done.stdout
    assert "WARNING" not in done.stdout + done.stderr.replace("INFO axes", "")


def test_positive_control_without_the_proxy_setting_check_deploy_warns():
    done = check_deploy()
    assert done.returncode != 0
    for code in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert code in done.stderr


def test_hsts_seconds_is_configurable_and_zero_is_reported():
    done = check_deploy(CONDUIT_BEHIND_TLS_PROXY="on", CONDUIT_HSTS_SECONDS="0")
    assert done.returncode != 0 and "security.W004" in done.stderr


@pytest.fixture
def staff(db):
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create_superuser("door_staff", "staff@example.invalid", PASSWORD)


def _totp_now(device) -> str:
    from django_otp.oath import TOTP

    totp = TOTP(device.bin_key, device.step, device.t0, device.digits, device.drift)
    totp.time = time.time()
    return f"{totp.token():0{device.digits}d}"


@override_settings(CONDUIT_ADMIN_2FA="required")
def test_second_factor_required_a_password_alone_does_not_reach_the_admin(client, staff):
    from django_otp.plugins.otp_totp.models import TOTPDevice

    device = TOTPDevice.objects.create(user=staff, name="phone", confirmed=True)
    response = client.post("/admin/login/?next=/admin/", {"username": "door_staff", "password": PASSWORD})
    assert response.status_code == 200  # the form again, with the token's error
    assert "otp_token" in response.content.decode()
    assert client.get("/admin/").status_code == 302
    # A session signed in with the password alone (as force_login makes one) is not enough.
    client.force_login(staff)
    assert client.get("/admin/")["Location"].startswith("/admin/login/")

    client.logout()
    response = client.post(
        "/admin/login/?next=/admin/",
        {
            "username": "door_staff",
            "password": PASSWORD,
            "otp_device": device.persistent_id,
            "otp_token": _totp_now(device),
        },
    )
    assert response.status_code == 302, response.context["form"].errors
    assert response["Location"] == "/admin/"
    assert client.get("/admin/").status_code == 200


@override_settings(CONDUIT_ADMIN_2FA="required")
def test_second_factor_required_a_wrong_code_is_refused(client, staff):
    from django_otp.plugins.otp_totp.models import TOTPDevice

    device = TOTPDevice.objects.create(user=staff, name="phone", confirmed=True)
    wrong = f"{(int(_totp_now(device)) + 1) % 1000000:06d}"
    client.post(
        "/admin/login/",
        {
            "username": "door_staff",
            "password": PASSWORD,
            "otp_device": device.persistent_id,
            "otp_token": wrong,
        },
    )
    assert client.get("/admin/").status_code == 302


def test_positive_control_with_the_second_factor_off_a_password_is_enough(client, staff):
    response = client.post("/admin/login/?next=/admin/", {"username": "door_staff", "password": PASSWORD})
    assert response.status_code == 302
    assert client.get("/admin/").status_code == 200


def _fail_then_try_the_right_password(client, limit: int):
    for _ in range(limit):
        response = client.post("/admin/login/", {"username": "door_staff", "password": "wrong-guess"})
        assert response.status_code in (200, 429)
    return client.post("/admin/login/?next=/admin/", {"username": "door_staff", "password": PASSWORD})


@override_settings(AXES_FAILURE_LIMIT=3, AXES_COOLOFF_TIME=timedelta(seconds=2))
def test_repeated_failed_sign_ins_lock_out_even_the_right_password_until_the_cool_off(client, staff):
    response = _fail_then_try_the_right_password(client, 3)
    assert response.status_code == 429
    assert client.get("/admin/").status_code == 302  # not signed in
    time.sleep(2.5)
    response = client.post("/admin/login/?next=/admin/", {"username": "door_staff", "password": PASSWORD})
    assert response.status_code == 302 and response["Location"] == "/admin/"
    assert client.get("/admin/").status_code == 200


@override_settings(AXES_FAILURE_LIMIT=3, AXES_ENABLED=False)
def test_positive_control_without_the_throttle_the_right_password_gets_in(client, staff):
    response = _fail_then_try_the_right_password(client, 3)
    assert response.status_code == 302


@override_settings(AXES_FAILURE_LIMIT=3)
def test_a_forged_forwarded_address_does_not_escape_the_lock(client, staff):
    for n in range(3):
        client.post(
            "/admin/login/",
            {"username": "door_staff", "password": "wrong-guess"},
            HTTP_X_FORWARDED_FOR=f"203.0.113.{n}",
        )
    response = client.post(
        "/admin/login/", {"username": "door_staff", "password": PASSWORD}, HTTP_X_FORWARDED_FOR="203.0.113.99"
    )
    assert response.status_code == 429


def test_the_test_client_sign_in_still_works(client, staff):
    assert client.login(username="door_staff", password=PASSWORD)
    assert client.get("/admin/").status_code == 200
