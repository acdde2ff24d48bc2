"""User datasets: reading metadata CSVs, checking every row, preparing a clean copy, zips, transcribing recordings."""
