"""The version, in a module of its own: adapters read it here, never through the package face."""

__version__ = "0.1.0"
