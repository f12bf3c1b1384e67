pytest_plugins = ["tests.conftest_kubo"]
