"""Backends forge_rt runs itself: the simulated model server, the embedded real model, managed servers."""
