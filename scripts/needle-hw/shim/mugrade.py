"""The course's grader client is not on PyPI; the test files import it for their submit_*
helpers, which pytest does not run."""


def submit(*args, **kwargs):
    pass
