"""The back office's own door: a second factor for staff (CONDUIT_ADMIN_2FA) and throttled sign-in."""
