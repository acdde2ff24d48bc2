"""Measured quality: intelligibility (CER/WER), speaker similarity, audio measures, best-checkpoint rules."""
