"""What one training run is: the TrainConfig schema, how it is built from YAML, --set and presets, and the seed streams it derives."""
