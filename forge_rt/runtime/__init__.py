"""forge_rt.runtime (being built)."""
