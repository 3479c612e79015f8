"""Git hooks: installing them, and the pre-push check."""
