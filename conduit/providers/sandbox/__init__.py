"""The synthetic sandbox platform: webhook proof and field map, page reader, transport.

Its stand-in, the sandbox provider, lives beside the house in simulators/sandbox.py.
"""
