"""The mtia_sim target: its emitter, compile driver and runtimes."""
