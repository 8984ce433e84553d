"""Learning across tasks: failures in the stores become verifier rules (`mine`), given to `kir
learn`. Everything learned is data (a rule file in the learned-rule format of verifier/learned.py,
with its provenance and the failing programs it came from), gated before it is kept, and
reversible by id (`kir rules retire ID`)."""
