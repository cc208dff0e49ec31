"""forge_rt.proxy (being built)."""
