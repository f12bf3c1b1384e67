"""docs/config-reference.md is what examples.config_reference generates from the models that parse the TOML files."""

from examples.config_reference import OUT, reference


def test_the_config_reference_matches_the_models():
    assert OUT.read_text() == reference(), "regenerate it: python -m examples.config_reference"


def test_every_key_of_the_shipped_configs_is_in_the_reference():
    import tomllib

    from examples.config_reference import ROOT

    text = OUT.read_text()
    for name in ("pool.toml", "pool-court.toml", "pool-court-forced.toml", "run.toml", "run-spot.toml"):
        doc = tomllib.loads((ROOT / "examples" / name).read_text())
        tables = [doc.get("pool", doc)]
        tables += [t for t in tables[0].values() if isinstance(t, dict)]
        if "pool" in doc:  # [pool.court.forced_errors]
            tables += [t for table in tables[1:] for t in table.values() if isinstance(t, dict)]
        for table in tables:
            for key in table:
                assert f"| `{key}` |" in text, f"{name}: {key}"
