"""The gluon target: its emitter, compile driver and runtimes."""
