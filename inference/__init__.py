"""Model loading and generation with hidden-state capture; prefill for verification."""
