"""App configuration for replies."""

from django.apps import AppConfig


class RepliesConfig(AppConfig):
    name = "replies"
    verbose_name = "Replies"
