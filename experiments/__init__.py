"""Experiments: each writes results/<name>/ and takes --seed and --scale {smoke,default,paper}."""
