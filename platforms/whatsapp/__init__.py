"""WhatsApp's proof pieces: its WhatsApp-shaped canary and its acceptance rows."""


def register() -> None:
    from platforms.whatsapp.canary import WHATSAPP
    from reconcile.proof.platforms import acceptance_rows_register, canary_platform_register

    canary_platform_register(WHATSAPP.name, WHATSAPP)
    acceptance_rows_register(acceptance_rows)


def acceptance_rows() -> tuple[list, list]:
    """WhatsApp's acceptance rows and their controls (loaded with the acceptance table)."""
    from platforms.whatsapp.acceptance import rows_and_controls

    return rows_and_controls()
