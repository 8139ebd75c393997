"""Meta: Instagram and Facebook Page sources (webhooks, Graph read-back) and its Graph simulator."""
