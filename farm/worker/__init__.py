"""The worker daemon: claims matching jobs, supervises the engine, runs the sweep, writes results."""
