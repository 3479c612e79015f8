"""Use cases over a :class:`~gitledger.session.Session`: typed in, typed out; no printing, no typer."""
