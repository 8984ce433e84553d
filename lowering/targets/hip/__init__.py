"""The hip target: its emitter, compile driver and runtimes."""
