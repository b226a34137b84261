"""The ``pluto`` command line."""
