"""Source.meta_app_id becomes Source.app_id: the app a shared callback belongs to names no platform."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("ingress", "0013_content_declared"),
    ]

    operations = [
        migrations.RenameField(model_name="source", old_name="meta_app_id", new_name="app_id"),
    ]
