#!/usr/bin/env python
"""Django's command-line utility for Conduit."""

import os
import sys
from pathlib import Path


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "conduit.settings")
    # The demo's env file: commands pasted from its banner run as printed (conduit/settings.py).
    os.environ.setdefault("CONDUIT_ENV_FILE", str(Path(__file__).resolve().parent / ".demo.env"))
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
