"""The Meta source adapters: each platform's webhook map with its Graph read-back mixed in,
so a comment read back is normalized by the very code that normalized its webhook."""

from __future__ import annotations

from conduit.providers.meta.reader import MetaInstagramReader, MetaPageReader
from conduit.providers.meta.webhook import MetaInstagramWebhook, MetaPageWebhook


class MetaInstagramAdapter(MetaInstagramReader, MetaInstagramWebhook):
    """Instagram professional accounts: comments, live comments and DMs; read back from the Graph API."""


class MetaPageAdapter(MetaPageReader, MetaPageWebhook):
    """Facebook Pages: feed comments and Messenger; read back from the Graph API."""
