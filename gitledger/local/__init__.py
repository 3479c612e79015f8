"""This machine: the guarded command, and the file and command checks."""
