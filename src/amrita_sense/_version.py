"""The version of amrita-sense-turbo (the one place it is written; setup.py reads it)."""

__version__ = "0.1.0"
