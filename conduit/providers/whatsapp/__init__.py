"""WhatsApp Business (the Cloud API): its webhook map, its statuses as receipts, its one transport
and its error meanings, on Meta's shared app callback and Graph client (docs/platforms/whatsapp.md)."""
