"""The flow-level network model's event engine (:mod:`.network` over the
compiled :mod:`._flow`)."""
