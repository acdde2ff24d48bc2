"""Text as the model reads it: language codes and limits, the run's front end (Amharic normalisation, G2P), the
tokenizer."""
