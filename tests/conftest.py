pytest_plugins = ["tests.conftest_kubo", "tests.conftest_chain"]
