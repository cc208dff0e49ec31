"""forge_rt.context (being built)."""
