"""The triton target: its emitter, compile driver and runtimes."""
