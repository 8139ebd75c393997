"""The stand-ins as a Django app: it holds the `sandbox_provider` and `graph_simulator` commands."""

from django.apps import AppConfig


class SimulatorsConfig(AppConfig):
    name = "simulators"
    verbose_name = "Platform stand-ins"
