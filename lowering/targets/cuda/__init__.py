"""The cuda target: its emitter, compile driver and runtimes."""
