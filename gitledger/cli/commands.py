"""Importing this module registers every command on the shared typer app."""

from gitledger.cli import audit as _audit  # noqa: F401
from gitledger.cli import github as _github  # noqa: F401
from gitledger.cli import hooks as _hooks  # noqa: F401
from gitledger.cli import inspect as _inspect  # noqa: F401
from gitledger.cli import keys as _keys  # noqa: F401
from gitledger.cli import steps as _steps  # noqa: F401
from gitledger.cli import sync as _sync  # noqa: F401
