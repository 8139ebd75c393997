"""django.contrib.admin with the door's site as `admin.site` (imports no model: loaded while apps populate)."""

from django.contrib.admin.apps import AdminConfig


class DoorAdminConfig(AdminConfig):
    """Django's admin app; `admin.site` is a DoorAdminSite (Django's documented default_site)."""

    default_site = "conduit.door.site.DoorAdminSite"
