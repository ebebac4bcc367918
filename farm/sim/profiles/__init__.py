"""The shipped simulator profiles (TOML data files; see farm.sim.profile)."""
