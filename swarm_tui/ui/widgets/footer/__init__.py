"""The console's bottom: the run's figures and sparkline (`stats_footer`) and the keys that fit,
whole (`key_footer`)."""
