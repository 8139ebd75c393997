"""App configuration for ingress."""

from django.apps import AppConfig


class IngressConfig(AppConfig):
    name = "ingress"
    verbose_name = "Ingress"
