"""Tasks, datasets and exact reward verifiers shared by worker, validator and trainer."""
