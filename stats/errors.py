"""The one exception type of the suite."""


class StatsError(Exception):
    """A user-facing error: one line that names the bad value and the valid choices."""
