"""Audio files: reading any format as mono float samples, writing 16-bit WAVs atomically, measuring clips."""
