"""The git hook scripts of gitledger (POSIX sh), installed as the package ``gitledger._hookscripts``.

``commit-msg`` and ``pre-push`` are what ``gitledger hooks install`` copies into a repository;
``__main__`` runs them for the pre-commit framework (.pre-commit-hooks.yaml).
"""
