"""Meta: Instagram and Facebook Page sources (webhooks, Graph read-back) and transports.

Its stand-in, the Graph API simulator, lives beside the house in simulators/meta/.
"""
