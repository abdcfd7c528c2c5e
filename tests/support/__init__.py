"""Helpers shared by the tests: seeded studies, the loopback judge server, the app starter, the CLI."""
