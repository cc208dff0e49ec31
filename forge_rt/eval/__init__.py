"""forge_rt.eval (being built)."""
