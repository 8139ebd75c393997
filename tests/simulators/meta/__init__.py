"""Tests of the Graph API simulator Conduit ships."""
