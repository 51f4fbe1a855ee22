"""Probes: what runs to show that an environment works (runner), the probe derived from what a
change affects (derived, importables), and a metric's runs compared between two states
(metric, significance)."""
