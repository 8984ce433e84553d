"""One folder per target: its emitter, compile driver and runtimes."""
