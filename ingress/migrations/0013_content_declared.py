import django.core.validators
from django.db import migrations, models

import conduit.content


class Migration(migrations.Migration):
    dependencies = [
        ("ingress", "0012_one_waiting_receipt_and_own_item_digest"),
    ]

    # The columns keep their types: only Django's state learns which hold buyer content (or a
    # digest of it) and that variable names are matched whole. No database operation (SQLite
    # would rebuild the tables, and their reference triggers with them).
    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="inboundevent",
                    name="message_text",
                    field=conduit.content.ContentField(blank=True),
                ),
                migrations.AlterField(
                    model_name="inboundevent",
                    name="payload_hash",
                    field=conduit.content.ContentDigestField(max_length=64),
                ),
                migrations.AlterField(
                    model_name="source",
                    name="secret_env",
                    field=models.CharField(
                        help_text="Name of the environment variable that holds the signing secret.",
                        max_length=128,
                        validators=[
                            django.core.validators.RegexValidator(
                                "\\A[A-Z_][A-Z0-9_]{0,127}\\Z",
                                "Give the NAME of an environment variable (upper case, digits, underscores), never its value.",
                            )
                        ],
                    ),
                ),
                migrations.AlterField(
                    model_name="source",
                    name="secret_env_next",
                    field=models.CharField(
                        blank=True,
                        help_text="Name of a second signing secret accepted while an app secret is being changed.",
                        max_length=128,
                        validators=[
                            django.core.validators.RegexValidator(
                                "\\A[A-Z_][A-Z0-9_]{0,127}\\Z",
                                "Give the NAME of an environment variable (upper case, digits, underscores), never its value.",
                            )
                        ],
                    ),
                ),
                migrations.AlterField(
                    model_name="source",
                    name="token_env",
                    field=models.CharField(
                        blank=True,
                        help_text="Name of the variable holding the access token reads present (Meta sources).",
                        max_length=128,
                        validators=[
                            django.core.validators.RegexValidator(
                                "\\A[A-Z_][A-Z0-9_]{0,127}\\Z",
                                "Give the NAME of an environment variable (upper case, digits, underscores), never its value.",
                            )
                        ],
                    ),
                ),
                migrations.AlterField(
                    model_name="source",
                    name="verify_token_env",
                    field=models.CharField(
                        blank=True,
                        help_text="Name of the variable holding the callback's verify token (Meta sources).",
                        max_length=128,
                        validators=[
                            django.core.validators.RegexValidator(
                                "\\A[A-Z_][A-Z0-9_]{0,127}\\Z",
                                "Give the NAME of an environment variable (upper case, digits, underscores), never its value.",
                            )
                        ],
                    ),
                ),
            ],
            database_operations=[],
        ),
    ]
