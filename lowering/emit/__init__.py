"""One emitter per target; importing a module registers its emitter."""
