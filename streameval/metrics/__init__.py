"""streameval's metrics, one module per family; see ``streameval.__all__`` for names."""
