"""The platforms' stand-ins, beside the house: the sandbox provider, the Graph API simulator, the
acceptance testkit, and their commands. The apps reach them only through conduit.standins."""
